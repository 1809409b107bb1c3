// The request log (each computer's site proxy records every exchange it decrypts as HAR): what the stack's
// `requestLog` setting makes of it. On by default: graders read what the browser sent and got from it.
import type { RequestLogConfig, StackConfig } from "./types";

/** The body limit when the config names none: 1 MiB each way. */
export const DEFAULT_REQUEST_LOG_BODY_BYTES = 1024 * 1024;

/** The request log a stack's setting asks for; undefined when it is off. */
export function plannedRequestLog(setting: StackConfig["requestLog"]): RequestLogConfig | undefined {
  if (setting === false) return undefined;
  if (setting === undefined || setting === true) return { bodyLimitBytes: DEFAULT_REQUEST_LOG_BODY_BYTES, redact: [] };
  return { bodyLimitBytes: setting.bodyLimitBytes, redact: [...setting.redact] };
}
