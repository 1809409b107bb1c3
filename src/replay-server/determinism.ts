// The script every replayed HTML document gets before any script of its own, so that two replays of one recording
// render alike: Date frozen at the recorded request's time and advanced as Web Page Replay's deterministic.js does
// (50 ms after every 25 readings), Math.random, crypto.getRandomValues and crypto.randomUUID drawn from a seeded
// generator (mulberry32, seeded per page from its URL and time: WPR's one fixed step sequence repeats after a few
// dozen values), and service worker registration refused (a worker would answer later loads itself, from a cache
// the replay does not control). Where it goes in the page (injectionPoint) and how a recorded Content-Security-Policy
// is widened to let exactly this script run (allowScriptInPolicy) are here too.
import { createHash } from "node:crypto";

/** FNV-1a of `text`: the per-page seed. */
export function pageSeed(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return hash;
}

/** The script's source for a page recorded at `timeMs` whose generator starts at `seed`. */
export function deterministicScript(timeMs: number, seed: number): string {
  return `(()=>{"use strict";let s=${seed >>> 0},t=${Math.trunc(timeMs)},n=0;
const next=()=>{s=(s+0x6d2b79f5)>>>0;let x=s;x=Math.imul(x^(x>>>15),x|1);x^=x+Math.imul(x^(x>>>7),x|61);return((x^(x>>>14))>>>0)/4294967296;};
Math.random=function random(){return next();};
const c=globalThis.crypto;if(c&&typeof c.getRandomValues==="function"){
const fill=function getRandomValues(a){if(!ArrayBuffer.isView(a)||a instanceof DataView||a instanceof Float32Array||a instanceof Float64Array)throw new DOMException("not an integer typed array","TypeMismatchError");if(a.byteLength>65536)throw new DOMException("more than 65536 bytes","QuotaExceededError");const b=new Uint8Array(a.buffer,a.byteOffset,a.byteLength);for(let i=0;i<b.length;i++)b[i]=Math.floor(next()*256);return a;};
c.getRandomValues=fill;
if(typeof c.randomUUID==="function")c.randomUUID=function randomUUID(){const b=fill(new Uint8Array(16));b[6]=(b[6]&15)|64;b[8]=(b[8]&63)|128;const h=[...b].map(v=>v.toString(16).padStart(2,"0")).join("");return h.slice(0,8)+"-"+h.slice(8,12)+"-"+h.slice(12,16)+"-"+h.slice(16,20)+"-"+h.slice(20);};}
const D=globalThis.Date;const tick=()=>{if(++n>25){t+=50;n=1;}return t;};
const F=function Date(...a){if(!new.target)return new D(tick()).toString();return Reflect.construct(D,a.length===0?[tick()]:a,new.target);};
Object.setPrototypeOf(F,D);F.prototype=D.prototype;F.now=function now(){return tick();};
Object.defineProperty(D.prototype,"constructor",{value:F,writable:true,configurable:true});globalThis.Date=F;
const sw=globalThis.ServiceWorkerContainer;if(sw)Object.defineProperty(sw.prototype,"register",{value:function register(){return Promise.reject(new DOMException("service workers are off in a replay","SecurityError"));},writable:true,configurable:true});
})();`;
}

/** `'sha256-…'`: the CSP source that allows exactly this inline script. */
export function scriptHashSource(script: string): string {
  return `'sha256-${createHash("sha256").update(script, "utf8").digest("base64")}'`;
}

/**
 * Where the script goes in an HTML document (a byte offset): after the `<head>` start tag, else the `<html>` one,
 * else the doctype, whichever is the first found before the page's first `<script`; else at the start (after a byte
 * order mark). WPR inserts after the last `<head…>` its greedy pattern finds (a `<header>` too), which can follow a
 * script of the page's own. Linear in the page: a search for a tag's `>` runs once per tag name (a pattern such as
 * `<head[^>]*>` tried at each of a hostile page's many `<head`s without a `>` was quadratic: a 1 MiB page took
 * minutes, on every request for it).
 */
export function injectionPoint(html: Buffer): number {
  const text = html.subarray(0, 1 << 20).toString("latin1");
  // Latin-1 lower-cases one character to one, so offsets stay the page's.
  const lower = text.toLowerCase();
  const firstScript = lower.search(/<script[\s>/]/);
  const limit = firstScript === -1 ? text.length : firstScript;
  for (const [open, delimited] of [
    ["<head", true],
    ["<html", true],
    ["<!doctype", false],
  ] as const) {
    const end = startTagEnd(lower, open, delimited);
    if (end !== undefined && end.start < limit) return end.end;
  }
  return text.startsWith("\xef\xbb\xbf") ? 3 : 0;
}

/**
 * The first `open` tag in `lower` (followed by whitespace, `>` or `/` when `delimited`) and the offset after its `>`;
 * undefined when there is none or it never closes (then no later one closes either).
 */
function startTagEnd(lower: string, open: string, delimited: boolean): { start: number; end: number } | undefined {
  for (let at = lower.indexOf(open); at !== -1; at = lower.indexOf(open, at + 1)) {
    if (delimited && !/[\s>/]/.test(lower.charAt(at + open.length))) continue;
    const close = lower.indexOf(">", at + open.length);
    return close === -1 ? undefined : { start: at, end: close + 1 };
  }
  return undefined;
}

/** `html` with `<script>script</script>` at its injection point. */
export function injectScript(html: Buffer, script: string): Buffer {
  const at = injectionPoint(html);
  return Buffer.concat([html.subarray(0, at), Buffer.from(`<script>${script}</script>`, "utf8"), html.subarray(at)]);
}

/**
 * A Content-Security-Policy header value widened so the injected script (`hashSource`) runs: its hash added to the
 * directive that governs inline `<script>` elements (script-src-elem, script-src, else default-src) of each policy in
 * the value. A directive left alone: one allowing every inline script already ('unsafe-inline' without a nonce or
 * hash, which a hash would switch off). 'none' is replaced, since it stands alone.
 */
export function allowScriptInPolicy(value: string, hashSource: string): string {
  return value
    .split(",")
    .map((policy) => {
      const directives = policy.split(";").map((d) => d.trim());
      const names = directives.map((d) => d.split(/\s+/, 1)[0].toLowerCase());
      const governing = ["script-src-elem", "script-src", "default-src"].find((name) => names.includes(name));
      if (governing === undefined) return policy;
      return directives
        .map((directive, i) => {
          if (names[i] !== governing) return directive;
          const sources = directive.split(/\s+/).slice(1);
          const lower = sources.map((s) => s.toLowerCase());
          const hasNonceOrHash = lower.some((s) => /^'(nonce|sha256|sha384|sha512)-/.test(s));
          if (lower.includes("'unsafe-inline'") && !hasNonceOrHash) return directive;
          const kept = sources.filter((s) => s.toLowerCase() !== "'none'");
          return [names[i], ...kept, hashSource].join(" ");
        })
        .filter((d) => d !== "")
        .join("; ");
    })
    .join(", ");
}
