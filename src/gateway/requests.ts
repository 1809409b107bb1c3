// requests/v1 on the gateway: each computer's request log (every exchange its site proxy decrypted, one HAR entry a
// line), read from the computer's site-proxy control listener with that computer's token and passed on line by line.
// Each entry is scrubbed again on its way with every token the gateway knows (the control token, every computer's
// tokens): a proxy only knows its own computer's, so this is where the others are kept out of what leaves.
import http, { type ServerResponse } from "node:http";
import { createInterface } from "node:readline";
import { bearer, computerControlToken, type SecretTokens } from "../protocol/auth";
import { REQUEST_LOG_MEDIA_TYPE, requestLogPath, type RequestLogListing } from "../protocol/request-log";
import { Scrubber } from "../protocol/scrub";
import type { GatewayConfig } from "./config";
import { replyJson } from "../service-kit/reply";
import type { Refuse } from "../service-kit/reply";

/** How long the proxy may take to begin its answer. */
const ANSWER_TIMEOUT_MS = 30_000;

/** Every string in `value` (an entry decoded from JSON) scrubbed; objects and arrays rebuilt, the rest kept. */
function scrubbedValue(value: unknown, scrubber: Scrubber): unknown {
  if (typeof value === "string") return scrubber.text(value);
  if (Array.isArray(value)) return value.map((item) => scrubbedValue(item, scrubber));
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, field] of Object.entries(value)) out[scrubber.text(key)] = scrubbedValue(field, scrubber);
    return out;
  }
  return value;
}

/**
 * A line of a request log as the gateway passes it on: its entry with every string scrubbed, as one line (no newline);
 * undefined for a line that is blank or not JSON (a torn line), which is left out.
 */
export function scrubbedLine(line: string, scrubber: Scrubber): string | undefined {
  if (line.trim() === "") return undefined;
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return undefined;
  }
  return JSON.stringify(scrubbedValue(entry, scrubber));
}

/** Resolves once `res` takes more, or has closed. */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.once("drain", done);
    res.once("close", done);
  });
}

export class RequestLogs {
  private readonly scrubber: Scrubber;

  constructor(
    private readonly computers: GatewayConfig["computers"],
    private readonly controlToken: string,
    private readonly agent: http.Agent,
    secrets: SecretTokens,
  ) {
    this.scrubber = new Scrubber(secrets, []);
  }

  /** Whether any computer's request log is served (the card then declares requests/v1). */
  static served(computers: GatewayConfig["computers"]): boolean {
    return Object.values(computers).some((computer) => computer.requests !== undefined);
  }

  serveListing(res: ServerResponse): void {
    const listing: RequestLogListing = {
      computers: Object.entries(this.computers)
        .filter(([, computer]) => computer.requests !== undefined)
        .map(([name]) => ({ name, path: requestLogPath(name) })),
    };
    replyJson(res, 200, listing);
  }

  serve(res: ServerResponse, name: string, refuse: Refuse): void {
    const computer = Object.hasOwn(this.computers, name) ? this.computers[name] : undefined;
    if (computer?.requests === undefined)
      return refuse(404, { error: "no request log for this computer", computer: name });
    const upstream = http.get(computer.requests, {
      agent: this.agent,
      headers: { authorization: bearer(computerControlToken(this.controlToken, name)) },
      timeout: ANSWER_TIMEOUT_MS,
    });
    upstream.on("timeout", () => upstream.destroy(new Error(`no answer within ${ANSWER_TIMEOUT_MS} ms`)));
    upstream.on("error", (error) => {
      if (res.headersSent) return void res.destroy();
      replyJson(res, 502, { error: "the computer's site proxy did not answer", computer: name, detail: error.message });
    });
    res.once("close", () => upstream.destroy());
    upstream.on("response", (answer) => {
      if (answer.statusCode !== 200) {
        answer.resume();
        return replyJson(res, 502, {
          error: "the computer's site proxy refused its request log",
          computer: name,
          status: answer.statusCode,
        });
      }
      void this.pass(answer, res);
    });
  }

  /** The entries from `answer` to `res`, each scrubbed, at the pace `res` takes them; a torn line is left out. */
  private async pass(answer: http.IncomingMessage, res: ServerResponse): Promise<void> {
    res.writeHead(200, { "Content-Type": REQUEST_LOG_MEDIA_TYPE });
    const lines = createInterface({ input: answer, crlfDelay: Infinity });
    try {
      for await (const line of lines) {
        const scrubbed = scrubbedLine(line, this.scrubber);
        if (scrubbed === undefined) continue;
        if (!res.write(scrubbed + "\n")) await drained(res);
        if (res.destroyed) return;
      }
      res.end();
    } catch {
      res.destroy();
    }
  }
}
