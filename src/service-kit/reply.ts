// A service's own answers (the gateway's, a capture or replay server's): JSON bodies, on a response or on a socket
// taken by an upgrade.
import { STATUS_CODES, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";

/** Answers the request in hand with the gateway's own error, and logs why. */
export type Refuse = (
  status: number,
  body: Record<string, unknown>,
  reason?: string,
  headers?: Record<string, string>,
) => void;

export function replyJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, {
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(text),
    "Cache-Control": "no-store",
    ...headers,
  });
  res.end(res.req.method === "HEAD" ? undefined : text);
}

/** Answers an upgrade request whose socket node handed over, then closes the socket. */
export function replyJsonOnSocket(
  socket: Duplex,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n`;
  for (const [name, value] of Object.entries(headers)) head += `${name}: ${value}\r\n`;
  if (socket.writable) socket.end(head + "\r\n" + text);
  else socket.destroy();
}
