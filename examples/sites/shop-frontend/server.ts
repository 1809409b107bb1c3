// The synthetic shop's frontend: its pages. /signin?user=NAME sets a cookie and the home page
// greets the signed-in user; /bench?n=N is a page with N subresources (bench/e2e.ts).
import { listenPort, sendHtml, sendJson, serve } from "../common/http";

const COOKIE = "shop_user";

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function signedInUser(cookieHeader: string | undefined): string | undefined {
  for (const part of (cookieHeader ?? "").split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === COOKIE) return decodeURIComponent(v.join("="));
  }
  return undefined;
}

serve(listenPort(80), (req, res) => {
  const url = new URL(req.url ?? "/", "http://site");
  const host = String(req.headers["x-forwarded-host"] ?? req.headers.host ?? "");
  if (url.pathname === "/ready") return sendJson(res, 200, { ready: true });
  if (url.pathname === "/signin") {
    const user = url.searchParams.get("user");
    if (!user)
      return sendHtml(
        res,
        200,
        `<!doctype html><title>Sign in - Synthetic shop</title><form action="/signin"><input name="user"><button>Sign in</button></form>`,
      );
    return sendHtml(
      res,
      200,
      `<!doctype html><title>Signed in - Synthetic shop</title><p id="user">${escapeHtml(user)}</p>`,
      {
        "set-cookie": `${COOKIE}=${encodeURIComponent(user)}; Path=/; SameSite=Lax`,
      },
    );
  }
  if (url.pathname === "/bench") {
    const n = Math.min(Number(url.searchParams.get("n") ?? 50) || 50, 500);
    // Relative, so the page loads whole under any prefix too (the gateway's /website/shop/).
    const imgs = Array.from({ length: n }, (_, i) => `<img src="asset/${i}.svg" width="8" height="8">`).join("");
    return sendHtml(res, 200, `<!doctype html><title>Bench ${n}</title>${imgs}`, { "cache-control": "no-store" });
  }
  const asset = /^\/asset\/(\d+)\.svg$/.exec(url.pathname);
  if (asset) {
    const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"><text>${asset[1]}</text></svg>`;
    res.writeHead(200, {
      "content-type": "image/svg+xml",
      "content-length": Buffer.byteLength(svg),
      "cache-control": "no-store",
    });
    res.end(svg);
    return;
  }
  if (url.pathname === "/") {
    const user = signedInUser(req.headers.cookie);
    return sendHtml(
      res,
      200,
      `<!doctype html><title>Synthetic shop</title><h1>Synthetic shop</h1><p id="host">${escapeHtml(host)}</p><p id="user">${user ? escapeHtml(user) : "signed out"}</p>`,
    );
  }
  sendHtml(res, 404, `<!doctype html><title>Not found - Synthetic shop</title><p>${escapeHtml(url.pathname)}</p>`);
});
