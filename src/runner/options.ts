// The options the runner's library functions take, and what a deploy answers: the types a caller builds and reads,
// apart from the functions (index.ts) that take them.
import type { Settled } from "./stack/concurrency";
import type { StackOutputs } from "./stack/outputs";
import type { WorkspaceOptions } from "./stack/workspace";

export interface RunnerOptions extends WorkspaceOptions {
  /** Default: artifacts/<stack> under the project directory. */
  artifactsDir?: string;
  /** Progress lines and warnings. Default: nothing is printed. */
  log?: (line: string) => void;
}

export interface DeployOptions extends RunnerOptions {
  /**
   * Preview first, an engine run of its own (several seconds): a provider's refusal then stops the deploy before
   * anything changes, and progress counts the preview's steps, deletions included (default false: progress counts
   * what the program declares).
   */
  preview?: boolean;
  /** Put secret outputs (the control token) in `displayed` in plain text. */
  showSecrets?: boolean;
  /** False skips the self-test this deploy, whatever the stack config says (default: as the config says). */
  selfTest?: boolean;
  /**
   * Cancels the deploy: the engine stops starting new steps, lets those under way finish and saves the state,
   * so the stack can be deployed again or destroyed. The promise then rejects with a RunnerError saying so.
   */
  signal?: AbortSignal;
}

export interface DeployResult {
  name: string;
  outputs: StackOutputs;
  /** Every output, secrets replaced by "[secret]" unless `showSecrets`. */
  displayed: Record<string, unknown>;
}

export interface DeployManyOptions extends DeployOptions {
  /** Deploys under way at once (default DEFAULT_DEPLOY_CONCURRENCY): the others wait their turn. */
  concurrency?: number;
  /** Told as each deploy ends, done or failed: its time (its wait for a slot left out) and error. */
  onSettled?: (stack: string, outcome: Settled) => void;
}
