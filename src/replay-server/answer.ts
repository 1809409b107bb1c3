// A recorded exchange's response as the replay server sends it: the recorded status and headers, less those that
// belonged to the recorded connection or that the server must compute again (HAR holds bodies decoded, so the
// recorded Content-Encoding and Content-Length no longer describe them), and the body; an HTML document with the
// determinism script in it (determinism.ts), its Content-Security-Policy widened for exactly that script.
import { CONNECTION_SPECIFIC_HEADERS } from "../protocol/hop-by-hop";
import { allowScriptInPolicy, deterministicScript, injectScript, pageSeed, scriptHashSource } from "./determinism";
import type { RecordedExchange } from "./recording";

export interface Answer {
  status: number;
  statusText: string;
  /** name, value, name, value, ...: repeated headers kept, in recorded order. */
  headers: string[];
  body: Buffer;
}

/** Recorded headers never sent again: the connection's, the recomputed framing, and the recorded Alt-Svc. */
const DROPPED = new Set([
  ...CONNECTION_SPECIFIC_HEADERS,
  "content-encoding",
  "content-length",
  // It names the live origin's HTTP/3 endpoint; a replayed site is reached over its proxy alone.
  "alt-svc",
]);

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** A value node would refuse to write (a hostile or broken recording): a control character but tab, or past latin1. */
function badValue(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if ((code < 0x20 && code !== 0x09) || code === 0x7f || code > 0xff) return true;
  }
  return false;
}

function headerValue(headers: readonly { name: string; value: string }[], name: string): string | undefined {
  return headers.find((h) => h.name.toLowerCase() === name)?.value;
}

function isHtml(contentType: string | undefined): boolean {
  return contentType !== undefined && contentType.split(";", 1)[0].trim().toLowerCase() === "text/html";
}

/**
 * The Content-Type to send for a body that was text in the HAR: the HAR holds text decoded, and it is sent as
 * UTF-8, so a recorded charset is replaced (and an HTML document without one is given it: a `<meta charset>` further
 * down must not outvote the bytes actually sent).
 */
export function utf8ContentType(contentType: string): string {
  const parts = contentType.split(";").map((p) => p.trim());
  const hasCharset = parts.some((p) => /^charset=/i.test(p));
  if (hasCharset) return parts.map((p) => (/^charset=/i.test(p) ? "charset=utf-8" : p)).join("; ");
  return isHtml(contentType) ? `${parts[0]}; charset=utf-8` : contentType;
}

/** What to send for `exchange`; a HEAD request gets the headers of the GET it was answered from. */
export function answerOf(exchange: RecordedExchange): Answer {
  const contentType = headerValue(exchange.responseHeaders, "content-type");
  const connectionNamed = new Set(
    exchange.responseHeaders
      .filter((h) => h.name.toLowerCase() === "connection")
      .flatMap((h) => h.value.split(",").map((t) => t.trim().toLowerCase())),
  );
  const bodiless = exchange.status === 204 || exchange.status === 304 || exchange.status < 200;
  const inject = !bodiless && isHtml(contentType) && exchange.responseBody.length > 0;
  let body = bodiless ? Buffer.alloc(0) : exchange.responseBody;
  let hashSource: string | undefined;
  if (inject) {
    const url = `${exchange.scheme}://${exchange.host}${exchange.target}`;
    const script = deterministicScript(exchange.startedMs, pageSeed(`${url} ${exchange.startedMs}`));
    body = injectScript(body, script);
    hashSource = scriptHashSource(script);
  }
  const headers: string[] = [];
  for (const { name, value } of exchange.responseHeaders) {
    const lower = name.toLowerCase();
    if (lower.startsWith(":") || DROPPED.has(lower) || connectionNamed.has(lower)) continue;
    if (!TOKEN.test(name) || badValue(value)) continue;
    if (lower === "content-type" && exchange.responseBodyIsText) headers.push(name, utf8ContentType(value));
    else if (lower === "content-security-policy" && hashSource !== undefined)
      headers.push(name, allowScriptInPolicy(value, hashSource));
    else headers.push(name, value);
  }
  const statusText = badValue(exchange.statusText) ? "" : exchange.statusText;
  return { status: exchange.status, statusText, headers, body };
}
