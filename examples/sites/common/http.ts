// What the sample sites share: JSON replies, reading a body, their settings and a listen port.
import http from "node:http";

export function sendJson(
  res: http.ServerResponse,
  status: number,
  value: unknown,
  headers: http.OutgoingHttpHeaders = {},
): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...headers });
  res.end(body);
}

export function sendHtml(
  res: http.ServerResponse,
  status: number,
  html: string,
  headers: http.OutgoingHttpHeaders = {},
): void {
  res.writeHead(status, {
    "content-type": "text/html; charset=utf-8",
    "content-length": Buffer.byteLength(html),
    ...headers,
  });
  res.end(html);
}

export function readBody(req: http.IncomingMessage, limit = 1 << 20): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => {
      body += chunk;
      if (body.length > limit) req.destroy(new Error("body too large"));
    });
    req.on("end", () => resolve(body));
    req.on("error", reject);
  });
}

/** The site's settings: one JSON object in AGENTENV_WEBSITE_SETTINGS (empty when unset). */
export function websiteSettings(env: NodeJS.ProcessEnv = process.env): Record<string, unknown> {
  const text = env.AGENTENV_WEBSITE_SETTINGS;
  if (!text) return {};
  const value: unknown = JSON.parse(text);
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new Error("AGENTENV_WEBSITE_SETTINGS must be a JSON object");
  return value as Record<string, unknown>;
}

/** The names the site claims in the stack config: a JSON list in AGENTENV_WEBSITE_DOMAINS (empty when unset). */
export function websiteDomains(env: NodeJS.ProcessEnv = process.env): string[] {
  return env.AGENTENV_WEBSITE_DOMAINS ? stringList(JSON.parse(env.AGENTENV_WEBSITE_DOMAINS)) : [];
}

export function listenPort(fallback: number, env: NodeJS.ProcessEnv = process.env): number {
  return env.PORT ? Number(env.PORT) : fallback;
}

export function stringList(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
}

/**
 * A site's data as a list of JSON values, for a site with nothing of its own to record (the live sample): `handle`
 * serves `/data` (GET lists, POST appends one JSON value, DELETE empties); `reset` empties it.
 */
export function dataPlane(): {
  handle: (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>;
  reset: () => void;
} {
  let items: unknown[] = [];
  const handle = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (req.method === "GET") return sendJson(res, 200, { items });
    if (req.method === "POST") {
      try {
        items.push(JSON.parse(await readBody(req)));
      } catch {
        return sendJson(res, 400, { error: "POST /data takes one JSON value" });
      }
      return sendJson(res, 201, { items });
    }
    if (req.method === "DELETE") {
      items = [];
      return sendJson(res, 200, { items });
    }
    sendJson(
      res,
      405,
      { error: `${req.method} /data is not supported; use GET, POST or DELETE` },
      { allow: "GET, POST, DELETE" },
    );
  };
  return {
    handle,
    reset: () => {
      items = [];
    },
  };
}

/** The website/v1 `reset` operation: `POST /reset` empties the site's data. */
export async function resetOperation(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  reset: () => void,
): Promise<void> {
  if (req.method !== "POST")
    return sendJson(res, 405, { error: "POST /reset empties the site's data" }, { allow: "POST" });
  reset();
  sendJson(res, 200, { reset: true });
}

export function serve(
  port: number,
  handler: (req: http.IncomingMessage, res: http.ServerResponse) => void | Promise<void>,
): http.Server {
  const server = http.createServer((req, res) => {
    Promise.resolve(handler(req, res)).catch((e: Error) => {
      if (!res.headersSent) sendJson(res, 500, { error: e.message });
      else res.destroy();
    });
  });
  server.listen(port, "0.0.0.0", () =>
    process.stdout.write(JSON.stringify({ event: "startup", port, time: new Date().toISOString() }) + "\n"),
  );
  for (const sig of ["SIGTERM", "SIGINT"] as const) process.on(sig, () => server.close(() => process.exit(0)));
  return server;
}
