// `up` and `destroy` as the runner runs them: the Automation API's, less the CLI runs its Stack makes once the engine
// is done. After `up` it runs `pulumi stack output` twice (masked, then with secrets, to tell which outputs are
// secret) and `pulumi stack history`; after `destroy`, the history. Each is a CLI start that loads and decrypts the
// state, 0.6-1 s here, so about 2 s after every deploy went to a summary nothing reads and to outputs the engine had
// already sent: its event for the stack resource's outputs carries them, each secret masked. The outputs are taken
// from that event (from the CLI when the event's text is not the state's, below); a caller that wants secret values
// asks the CLI for them (Stack.outputs).
import type {
  DestroyOptions,
  DestroyResult,
  EngineEvent,
  OutputMap,
  Stack,
  UpOptions,
  UpResult,
} from "@pulumi/pulumi/automation";
import { SECRET_PLACEHOLDER } from "./outputs";
import { holdsSecret } from "./state-files";

const STACK_TYPE = "pulumi:pulumi:Stack";

/**
 * The stack's outputs as its outputs event carries them, as an OutputMap: an output holding a secret is
 * SECRET_PLACEHOLDER and flagged secret (the event has no secret's value), as the state files are read. Undefined
 * when the event's text is not the state's: before it sends an event, the engine masks any text equal to a secret
 * config value wherever it appears, so a plain output showing SECRET_PLACEHOLDER may have held such text.
 */
export function outputMapOfEvent(outputs: Record<string, unknown>): OutputMap | undefined {
  const map: OutputMap = {};
  for (const [key, value] of Object.entries(outputs)) {
    if (holdsSecret(value)) map[key] = { value: SECRET_PLACEHOLDER, secret: true };
    else if (showsMaskedText(value)) return undefined;
    else map[key] = { value, secret: false };
  }
  return map;
}

function showsMaskedText(value: unknown): boolean {
  if (typeof value === "string") return value.includes(SECRET_PLACEHOLDER);
  if (value === null || typeof value !== "object") return false;
  return Object.values(value).some(showsMaskedText);
}

/**
 * The outputs `event` carries when it is the stack resource's outputs event of the operation's last step; a
 * refresh's event for the stack carries the outputs as they were before it.
 */
export function stackOutputsOfEvent(event: EngineEvent): Record<string, unknown> | undefined {
  const done = event.resOutputsEvent?.metadata;
  if (done?.type !== STACK_TYPE || done.op === "refresh") return undefined;
  return (done.new?.outputs ?? {}) as Record<string, unknown>;
}

/** The stack's outputs from the CLI, each secret's value replaced as the event replaces it. */
async function maskedOutputsOf(stack: Stack): Promise<OutputMap> {
  const outputs = await stack.outputs();
  return Object.fromEntries(
    Object.entries(outputs).map(([key, output]) => [
      key,
      output.secret ? { ...output, value: SECRET_PLACEHOLDER } : output,
    ]),
  );
}

/**
 * `stack` as the Automation API's `up` and `destroy` see it once the engine is done: `outputs` answers with what
 * `captured` holds (the CLI is asked only when no event carried them whole), and `info` with no summary. Those two
 * are the methods the operations call afterwards; everything else is `stack`'s own.
 */
function withoutReadBack(stack: Stack, captured: () => OutputMap | undefined): Stack {
  return Object.create(stack, {
    outputs: { value: async () => captured() ?? maskedOutputsOf(stack) },
    info: { value: async () => undefined },
  }) as Stack;
}

/**
 * `pulumi up` through the Automation API; `outputs` from the engine's events (from the CLI when they cannot be
 * taken whole from there), each secret's value SECRET_PLACEHOLDER; no `summary`.
 */
export async function up(
  stack: Stack,
  options: UpOptions = {},
): Promise<Pick<UpResult, "stdout" | "stderr" | "outputs">> {
  let outputs: OutputMap | undefined;
  const onEvent = (event: EngineEvent) => {
    const carried = stackOutputsOfEvent(event);
    if (carried !== undefined) outputs = outputMapOfEvent(carried);
    options.onEvent?.(event);
  };
  return withoutReadBack(stack, () => outputs).up({ ...options, onEvent });
}

/** `pulumi destroy` through the Automation API; no `summary`. */
export async function destroy(
  stack: Stack,
  options: DestroyOptions = {},
): Promise<Pick<DestroyResult, "stdout" | "stderr">> {
  return withoutReadBack(stack, () => undefined).destroy(options);
}
