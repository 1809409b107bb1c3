// The HTML of `multienv watch`: one panel per computer (its screen, its URL, its proxy log's request and refusal
// lines), fed by the page's WebSocket. What a computer shows (titles, URLs, hosts) is the agent's and may be hostile,
// so the script writes all of it as text (textContent), never as markup; frames are data: images.

/** `text` safe inside HTML text and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] ?? c,
  );
}

const STYLE = `
body { font: 13px system-ui, sans-serif; margin: 0; background: #16181d; color: #e6e6e6; }
header { padding: 8px 14px; background: #0d0e11; display: flex; gap: 14px; align-items: baseline; }
header h1 { font-size: 15px; margin: 0; }
#state { color: #9aa0a6; }
main { display: grid; grid-template-columns: repeat(auto-fit, minmax(720px, 1fr)); gap: 12px; padding: 12px; }
section { background: #22252b; border-radius: 6px; padding: 8px; display: grid; grid-template-columns: 1fr 280px;
  grid-template-rows: auto auto 1fr; gap: 6px; }
section h2 { grid-column: 1 / 3; font-size: 14px; margin: 0; }
.url { grid-column: 1 / 3; font-family: ui-monospace, monospace; color: #8ab4f8; overflow-wrap: anywhere; }
.screen { width: 100%; background: #000; min-height: 200px; object-fit: contain; }
.log { margin: 0; padding: 0 0 0 4px; list-style: none; font-family: ui-monospace, monospace; font-size: 11px;
  overflow-y: auto; max-height: 520px; }
.log li { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.log .refused { color: #f28b82; }
.error { grid-column: 1 / 3; color: #f28b82; }
`;

// Runs in the viewer's browser. Kept to what every browser has; no framework, no outside request (CSP: none allowed).
const SCRIPT = `
const panels = {};
for (const section of document.querySelectorAll("section[data-computer]")) {
  panels[section.dataset.computer] = {
    url: section.querySelector(".url"),
    screen: section.querySelector(".screen"),
    log: section.querySelector(".log"),
    error: section.querySelector(".error"),
  };
}
const state = document.getElementById("state");
function line(l) {
  const li = document.createElement("li");
  const time = (l.time || "").slice(11, 19);
  li.textContent = l.event === "refused"
    ? time + " refused " + l.method + " " + l.host + ":" + l.port + (l.why ? " (" + l.why + ")" : "")
    : time + " " + l.method + " " + l.host + ":" + l.port + " " + (l.status ?? "");
  li.className = l.event;
  li.title = li.textContent;
  return li;
}
function connect() {
  const socket = new WebSocket(location.href.replace(/^http/, "ws").split("?")[0] + "live");
  socket.onopen = () => { state.textContent = "live"; };
  socket.onclose = () => { state.textContent = "disconnected; retrying"; setTimeout(connect, 2000); };
  socket.onmessage = (message) => {
    const m = JSON.parse(message.data);
    const panel = panels[m.computer];
    if (!panel) return;
    if (m.type === "frame") panel.screen.src = "data:image/jpeg;base64," + m.data;
    else if (m.type === "url") { panel.url.textContent = m.url; panel.url.title = m.title || ""; panel.error.textContent = ""; }
    else if (m.type === "error") panel.error.textContent = m.message;
    else if (m.type === "log") {
      const follow = panel.log.scrollTop + panel.log.clientHeight >= panel.log.scrollHeight - 4;
      for (const l of m.lines) panel.log.appendChild(line(l));
      while (panel.log.childElementCount > 500) panel.log.firstElementChild.remove();
      if (follow) panel.log.scrollTop = panel.log.scrollHeight;
    }
  };
}
connect();
`;

/** The page for a stack's computers. */
export function watchPage(stack: string, computers: string[]): string {
  const panels = computers
    .map(
      (c) =>
        `<section data-computer="${escapeHtml(c)}"><h2>${escapeHtml(c)}</h2><div class="url"></div>` +
        `<img class="screen" alt="${escapeHtml(c)}'s screen"><ol class="log"></ol><div class="error"></div></section>`,
    )
    .join("\n");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>multienv watch ${escapeHtml(stack)}</title>
<meta name="referrer" content="no-referrer"><style>${STYLE}</style></head>
<body><header><h1>stack ${escapeHtml(stack)}</h1><span id="state">connecting</span><span>read-only</span></header>
<main>
${panels}
</main>
<script>${SCRIPT}</script>
</body></html>
`;
}
