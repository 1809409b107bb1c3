// The request log (each computer's site proxy records every exchange it decrypts as HAR): what the stack's
// `requestLog` setting makes of it. On by default: graders read what the browser sent and got from it.
import { DEFAULT_REQUEST_LOG_BODY_BYTES } from "../protocol/request-log";
import { problem } from "./problems";
import type { Problem, RequestLogConfig, StackConfig } from "./types";

/** The request log a stack's setting asks for; undefined when it is off. */
export function plannedRequestLog(setting: StackConfig["requestLog"]): RequestLogConfig | undefined {
  if (setting === false) return undefined;
  if (setting === undefined || setting === true) return { bodyLimitBytes: DEFAULT_REQUEST_LOG_BODY_BYTES, redact: [] };
  return { bodyLimitBytes: setting.bodyLimitBytes, redact: [...setting.redact] };
}

/** A live site recorded into a request log the stack turned off: nothing would keep its exchanges. */
export function recordProblems(config: Pick<StackConfig, "requestLog" | "websites">): Problem[] {
  if (config.requestLog !== false) return [];
  return Object.keys(config.websites)
    .sort()
    .filter((site) => config.websites[site].record)
    .map((site) =>
      problem(
        ["websites", site, "record"],
        "records into the request log, which requestLog: false turns off; turn the request log on or remove record",
      ),
    );
}
