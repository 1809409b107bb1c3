// What the Pulumi engine's events say went wrong, as the user needs it: the CLI's own error says only "update failed"
// or "preview failed", while the engine's error diagnostics name the resource and hold the provider's own lines (a
// self-test names each failed check on one), without the stack trace a provider's exception carries.
import type { EngineEvent } from "@pulumi/pulumi/automation";

/** A cap against a runaway transcript, far above a self-test's line per failing check. */
const MAX_ENGINE_ERROR_LINES = 200;

/** Adds the text of an engine event's error diagnostic to `errors`, led by the resource it is about. */
export function collectEngineError(event: EngineEvent, errors: string[]): void {
  const diagnostic = event.diagnosticEvent;
  if (diagnostic?.severity !== "error") return;
  const text = engineErrorText(diagnostic.message);
  const resource = diagnostic.urn ? resourceOfUrn(diagnostic.urn) : undefined;
  errors.push(resource ? `${resource}: ${text}` : text);
}

/** `type (name)` of a URN, as the Pulumi CLI names a resource in its diagnostics. */
function resourceOfUrn(urn: string): string | undefined {
  const parts = urn.split("::");
  const type = parts[2]?.split("$").pop();
  const name = parts[3];
  return type && name ? `${type} (${name})` : undefined;
}

/** A diagnostic's lines without the stack trace's and the blank ones, at most MAX_ENGINE_ERROR_LINES. */
function engineErrorText(message: string): string {
  const lines = message
    .trim()
    .split("\n")
    .filter((line) => !/^\s+at /.test(line) && line.trim() !== "");
  return lines.length > MAX_ENGINE_ERROR_LINES
    ? [...lines.slice(0, MAX_ENGINE_ERROR_LINES), `… ${lines.length - MAX_ENGINE_ERROR_LINES} more lines`].join("\n")
    : lines.join("\n");
}
