// `multienv watch` and `multienv takeover` on a deployed stack: its computers' feeds (watch.ts) through the gateway,
// served on the local page (watch-server.ts), each takeover's record kept in run.json (evidence/takeovers.ts).
import { userInfo } from "node:os";
import { RunnerError } from "../errors";
import { artifactsDirOf } from "../evidence/artifacts";
import { recordTakeover } from "../evidence/takeovers";
import type { GatewayAccess } from "../stack/outputs";
import { DEFAULT_PROJECT_DIR } from "../stack/workspace";
import { computersOf, type OperatorOptions } from "./operator";
import { takeoverGateway } from "./takeover";
import { computerFeed } from "./watch";
import { startWatchServer, type WatchServer } from "./watch-server";

export interface WatchStackOptions extends OperatorOptions {
  /** Default 0: a free port. */
  port?: number;
  /** Who takes computers over. Default: the OS user. */
  operator?: string;
  /** A computer to take over at once (`multienv takeover`). */
  takeNow?: string;
}

/**
 * Serves `watch`'s page for the stack, the gateway reached with `access` (kept open while the page is served: a
 * port-forward on kubernetes). Viewers may take a computer over as `operator`; each takeover's record goes into
 * run.json.
 */
export async function watchStackWith(
  stack: string,
  access: (stack: string) => Promise<GatewayAccess & { close(): Promise<void> }>,
  options: WatchStackOptions,
): Promise<WatchServer> {
  const computers = await computersOf(stack, undefined, options);
  if (options.takeNow !== undefined && !computers.includes(options.takeNow))
    throw new RunnerError(
      `--computer ${options.takeNow}: stack ${stack} has no such computer; it has ${computers.join(", ") || "none"}`,
    );
  const reached = await access(stack);
  const artifactsDir = options.artifactsDir ?? artifactsDirOf(options.projectDir ?? DEFAULT_PROJECT_DIR, stack);
  const server = await startWatchServer({
    stack,
    port: options.port,
    feeds: Object.fromEntries(computers.map((computer) => [computer, computerFeed(reached, computer)])),
    takeover: {
      gateway: takeoverGateway(reached.gatewayUrl, reached.controlToken),
      operator: options.operator ?? userInfo().username,
      onTakeover: (record) => recordTakeover(artifactsDir, stack, record),
    },
    ...(options.takeNow !== undefined ? { takeNow: options.takeNow } : {}),
  }).catch(async (error: unknown) => {
    await reached.close();
    throw error;
  });
  return {
    ...server,
    close: async () => {
      await server.close();
      await reached.close();
    },
  };
}
