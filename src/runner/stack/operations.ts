// `up` and `destroy` as the runner runs them: the Automation API's, less the CLI runs its Stack makes once the engine
// is done. After `up` it runs `pulumi stack output` twice (masked, then with secrets, to tell which outputs are
// secret) and `pulumi stack history`; after `destroy`, the history. Each is a CLI start that loads and decrypts the
// state, 0.6-1 s here, so about 2 s after every deploy went to a summary nothing reads and to outputs the engine had
// already sent: its event for the stack resource's outputs carries them, each secret masked. The outputs are taken
// from that event; a caller that wants secret values asks the CLI for them (Stack.outputs).
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
 * SECRET_PLACEHOLDER and flagged secret (the event has no secret's value), as the state files are read.
 */
export function outputMapOfEvent(outputs: Record<string, unknown>): OutputMap {
  return Object.fromEntries(
    Object.entries(outputs).map(([key, value]) =>
      holdsSecret(value) ? [key, { value: SECRET_PLACEHOLDER, secret: true }] : [key, { value, secret: false }],
    ),
  );
}

/** The stack's outputs, when `event` is its stack resource's outputs event. */
export function stackOutputsOfEvent(event: EngineEvent): OutputMap | undefined {
  const done = event.resOutputsEvent?.metadata;
  if (done?.type !== STACK_TYPE || done.new?.outputs === undefined) return undefined;
  return outputMapOfEvent(done.new.outputs as Record<string, unknown>);
}

/**
 * `stack` as the Automation API's `up` and `destroy` see it once the engine is done: `outputs` answers with what
 * `captured` holds (the CLI is asked only when no event carried them), and `info` with no summary. Those two are
 * the methods the operations call afterwards; everything else is `stack`'s own.
 */
function withoutReadBack(stack: Stack, captured: () => OutputMap | undefined): Stack {
  return Object.create(stack, {
    outputs: { value: async () => captured() ?? stack.outputs() },
    info: { value: async () => undefined },
  }) as Stack;
}

/** `pulumi up` through the Automation API; `outputs` from the engine's events, secrets masked; no `summary`. */
export async function up(
  stack: Stack,
  options: UpOptions = {},
): Promise<Pick<UpResult, "stdout" | "stderr" | "outputs">> {
  let outputs: OutputMap | undefined;
  const onEvent = (event: EngineEvent) => {
    outputs = stackOutputsOfEvent(event) ?? outputs;
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
