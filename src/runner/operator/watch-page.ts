// The HTML of `multienv watch`: one panel per computer (its screen, its URL, its proxy log's request and refusal
// lines), fed by the page's WebSocket. What a computer shows (titles, URLs, hosts) is the agent's and may be hostile,
// so the script writes all of it as text (textContent), never as markup; frames come as binary messages (a small
// header, then the JPEG: watch-feeds.ts), decoded by createImageBitmap off the page's main thread and drawn on the
// panel's canvas, a frame whose decoding ends after a newer one's dropped. When the server
// allows takeovers, each panel has a take-over / hand-back button, an address field, the computer's tabs (a click
// brings one to the front while this page holds the computer; each is named by text alone), and, while this page holds
// the computer, the screen takes the person's pointer, wheel, keys and pastes: coordinates as fractions of the frame,
// never of anything the frame draws.
import { FRAME_HEADER_BYTES, FRAME_KIND } from "./watch-feeds";

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
.control { grid-column: 1 / 3; display: none; gap: 8px; align-items: center; }
.takeover .control { display: flex; }
.control input { flex: 1; font-family: ui-monospace, monospace; }
.request { color: #fdd663; }
.tabs { grid-column: 1 / 3; display: none; gap: 4px; flex-wrap: wrap; }
.takeover .tabs { display: flex; }
.tabs button { max-width: 220px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.tabs button.front { font-weight: bold; }
.mine .screen { outline: 3px solid #fdd663; cursor: crosshair; }
`;

// Runs in the viewer's browser. Kept to what every browser has; no framework, no outside request (CSP: none allowed).
const SCRIPT = `
const panels = {};
// The computers in the server's order: a frame names its computer by its place in it.
const computers = [];
for (const section of document.querySelectorAll("section[data-computer]")) {
  computers.push(section.dataset.computer);
  panels[section.dataset.computer] = {
    url: section.querySelector(".url"),
    screen: section.querySelector(".screen"),
    log: section.querySelector(".log"),
    error: section.querySelector(".error"),
    button: section.querySelector(".take"),
    address: section.querySelector(".address"),
    request: section.querySelector(".request"),
    tabs: section.querySelector(".tabs"),
    section,
    mine: false,
    // Frames received, and the number of the one on the canvas: decodings may end out of order, the newest wins.
    framesIn: 0,
    frameShown: 0,
  };
}
function frame(buffer) {
  const header = new DataView(buffer);
  if (buffer.byteLength < ${FRAME_HEADER_BYTES} || header.getUint8(0) !== ${FRAME_KIND}) return;
  const panel = panels[computers[header.getUint16(1)]];
  if (!panel) return;
  const number = ++panel.framesIn;
  createImageBitmap(new Blob([new Uint8Array(buffer, ${FRAME_HEADER_BYTES})], { type: "image/jpeg" })).then((bitmap) => {
    if (number < panel.frameShown) return bitmap.close();
    panel.frameShown = number;
    const screen = panel.screen;
    if (screen.width !== bitmap.width || screen.height !== bitmap.height) {
      screen.width = bitmap.width;
      screen.height = bitmap.height;
    }
    screen.getContext("2d").drawImage(bitmap, 0, 0);
    bitmap.close();
  }, () => undefined);
}
let socket;
function sendInput(computer, input) {
  if (panels[computer].mine && socket && socket.readyState === 1) socket.send(JSON.stringify({ type: "input", computer, input }));
}
function mods(e) { return (e.altKey ? 1 : 0) | (e.ctrlKey ? 2 : 0) | (e.metaKey ? 4 : 0) | (e.shiftKey ? 8 : 0); }
const BUTTONS = ["left", "middle", "right"];
for (const [computer, panel] of Object.entries(panels)) {
  const at = (e) => {
    const r = panel.screen.getBoundingClientRect();
    return { x: Math.min(1, Math.max(0, (e.clientX - r.left) / r.width)), y: Math.min(1, Math.max(0, (e.clientY - r.top) / r.height)) };
  };
  panel.screen.tabIndex = 0;
  panel.screen.addEventListener("mousedown", (e) => { e.preventDefault(); panel.screen.focus(); sendInput(computer, { kind: "pointer", action: "down", ...at(e), button: BUTTONS[e.button] || "left", clickCount: Math.min(3, e.detail || 1), modifiers: mods(e) }); });
  panel.screen.addEventListener("mouseup", (e) => sendInput(computer, { kind: "pointer", action: "up", ...at(e), button: BUTTONS[e.button] || "left", clickCount: Math.min(3, e.detail || 1), modifiers: mods(e) }));
  let lastMove = 0;
  panel.screen.addEventListener("mousemove", (e) => { const now = Date.now(); if (now - lastMove < 30) return; lastMove = now; sendInput(computer, { kind: "pointer", action: "move", ...at(e), button: "none", clickCount: 0, modifiers: mods(e) }); });
  panel.screen.addEventListener("wheel", (e) => { if (!panel.mine) return; e.preventDefault(); sendInput(computer, { kind: "wheel", ...at(e), deltaX: Math.max(-10000, Math.min(10000, e.deltaX)), deltaY: Math.max(-10000, Math.min(10000, e.deltaY)), modifiers: mods(e) }); }, { passive: false });
  panel.screen.addEventListener("contextmenu", (e) => { if (panel.mine) e.preventDefault(); });
  panel.screen.addEventListener("dragstart", (e) => e.preventDefault());
  const key = (action) => (e) => {
    if (!panel.mine) return;
    if (action === "down" && (e.ctrlKey || e.metaKey) && e.key === "v") return; // the paste event sends the text
    e.preventDefault();
    const text = action === "down" && e.key.length === 1 && !e.ctrlKey && !e.metaKey ? e.key : undefined;
    sendInput(computer, { kind: "key", action, key: e.key.slice(0, 32), code: e.code.slice(0, 32), ...(text ? { text } : {}), modifiers: mods(e) });
  };
  panel.screen.addEventListener("keydown", key("down"));
  panel.screen.addEventListener("keyup", key("up"));
  panel.screen.addEventListener("paste", (e) => { const text = e.clipboardData.getData("text/plain"); if (text) { e.preventDefault(); sendInput(computer, { kind: "paste", text: text.slice(0, 16384) }); } });
  panel.button.addEventListener("click", () => socket && socket.send(JSON.stringify({ type: panel.mine ? "handBack" : "take", computer })));
  panel.address.addEventListener("keydown", (e) => { if (e.key === "Enter") sendInput(computer, { kind: "navigate", url: panel.address.value }); });
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
  socket = new WebSocket(location.href.replace(/^http/, "ws").split("?")[0] + "live");
  socket.binaryType = "arraybuffer";
  socket.onopen = () => { state.textContent = "live"; };
  socket.onclose = () => { state.textContent = "disconnected; retrying"; setTimeout(connect, 2000); };
  socket.onmessage = (message) => {
    if (typeof message.data !== "string") return frame(message.data);
    const m = JSON.parse(message.data);
    if (m.type === "hello" && m.takeover) for (const p of Object.values(panels)) p.section.classList.add("takeover");
    const panel = panels[m.computer];
    if (!panel) return;
    if (m.type === "url") { panel.url.textContent = m.url; panel.url.title = m.title || ""; panel.error.textContent = ""; }
    else if (m.type === "tabs") {
      panel.tabs.replaceChildren(...m.tabs.map((t, i) => {
        const b = document.createElement("button");
        b.textContent = t.title || t.url || "(blank)";
        b.title = t.url;
        if (i === 0) b.className = "front";
        b.addEventListener("click", () => sendInput(m.computer, { kind: "tab", targetId: t.id }));
        return b;
      }));
    }
    else if (m.type === "error") panel.error.textContent = m.message;
    else if (m.type === "takeover") {
      panel.mine = m.mine;
      panel.section.classList.toggle("mine", m.mine);
      panel.button.textContent = m.mine ? "Hand back" : m.state.taken ? "Taken by " + m.state.taken.operator : "Take over";
      panel.button.disabled = !m.mine && !!m.state.taken;
      panel.request.textContent = m.state.request ? "The agent asks for a person: " + m.state.request.reason : "";
    }
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
        `<div class="control"><button class="take">Take over</button><input class="address" placeholder="address: Enter to go" aria-label="address"><span class="request"></span></div><div class="tabs" aria-label="tabs"></div>` +
        `<canvas class="screen" width="0" height="0" role="img" aria-label="${escapeHtml(c)}'s screen"></canvas><ol class="log"></ol><div class="error"></div></section>`,
    )
    .join("\n");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>multienv watch ${escapeHtml(stack)}</title>
<meta name="referrer" content="no-referrer"><style>${STYLE}</style></head>
<body><header><h1>stack ${escapeHtml(stack)}</h1><span id="state">connecting</span><span id="mode"></span></header>
<main>
${panels}
</main>
<script>${SCRIPT}</script>
</body></html>
`;
}
