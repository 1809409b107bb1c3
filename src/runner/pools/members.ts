// A warm pool member's life on the engine, through the runner's own operations: deployed from the task's stack file
// as a stack of its own (deployStack), reset at each release with its episode's evidence collected (resetStack), and
// destroyed, its evidence collected first (destroyStack). Its handles (what a claim hands out) are written once it is
// ready.
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  deployStack,
  destroyStack,
  gatewayAccess,
  readStackState,
  resetStack,
  specFromStackFile,
  type StackState,
} from "../index";
import { artifactsDirOf } from "../evidence/artifacts";
import { StackNotInStateError } from "../errors";
import type { StackOutputs } from "../stack/outputs";
import type { ResetResult } from "../lifecycle/reset";
import { projectDirOf, readHandles, stackFileOf, writeHandles, type MemberHandles, type PoolOptions } from "./pool";

/**
 * Each member's state as its resets read it, kept by this process: read once per deploy (the Pulumi CLI takes seconds
 * for it), since a reset changes nothing of it. A deploy writes the member's handles anew (new tokens), so the state
 * is kept with the handles it was read beside, and read again when they differ: a member redeployed by another
 * process (a `multienv warm` beside serve) is never reset with the state of its last deploy.
 */
const memberStates = new Map<string, { handles: string; state: Promise<StackState> }>();

function stateOf(task: string, member: string, options: PoolOptions): Promise<StackState> {
  const handles = JSON.stringify(readHandles(projectDirOf(options), task, member) ?? null);
  const kept = memberStates.get(member);
  if (kept !== undefined && kept.handles === handles) return kept.state;
  const state = readStackState(member, { projectDir: options.projectDir, env: options.env });
  memberStates.set(member, { handles, state });
  state.catch(() => memberStates.delete(member));
  return state;
}

/** The handles of a deployed member: its outputs' DevTools URLs and start tabs, and its agent tokens (secrets). */
export async function memberHandles(
  member: string,
  outputs: StackOutputs,
  options: PoolOptions,
  stackFileHash?: string,
): Promise<MemberHandles> {
  const access = await gatewayAccess(member, { projectDir: options.projectDir, env: options.env });
  try {
    const computers: MemberHandles["computers"] = {};
    for (const [name, computer] of Object.entries(outputs.computers)) {
      const agentToken = access.agentTokens?.[name];
      if (agentToken === undefined) throw new Error(`stack ${member}: computer ${name} has no agent token output`);
      computers[name] = { cdpUrl: computer.cdpUrl, agentToken, startTabs: computer.startTabs };
    }
    // On the kubernetes target the cdpUrls name the gateway's pod (kubernetes://); a claim reaches them through a
    // port-forward of its own process, so the handles keep the pod and the URL they are under.
    const forward =
      access.portForward === undefined ? {} : { portForward: access.portForward, gatewayUrl: outputs.gatewayUrl };
    return { stack: member, stackFileHash, computers, ...forward };
  } finally {
    await access.close();
  }
}

/** Deploys a member from the task's stack file and writes its handles. */
export async function deployMember(
  task: string,
  member: string,
  stackFileHash: string,
  options: PoolOptions,
): Promise<void> {
  const projectDir = projectDirOf(options);
  memberStates.delete(member);
  const spec = specFromStackFile(stackFileOf(projectDir, task), member);
  const deployed = await deployStack(spec, { projectDir, env: options.env, log: options.log });
  // deployStack returns once every computer's DevTools answers: the member is handed out with browsers ready.
  await writeHandles(projectDir, task, await memberHandles(member, deployed.outputs, options, stackFileHash));
}

/** Destroys a member, its last episode's evidence collected first (down's own rule), and removes it from the state. */
export async function destroyMember(member: string, options: PoolOptions): Promise<void> {
  memberStates.delete(member);
  try {
    await destroyStack(member, { projectDir: options.projectDir, env: options.env, log: options.log, remove: true });
  } catch (error) {
    // A member whose deploy failed before its stack was made, or whose stack was taken down by hand, is gone already.
    if (!(error instanceof StackNotInStateError)) throw error;
  }
}

/**
 * Resets a member for the next episode. With `episode`, the finished episode's evidence is collected and moved to
 * artifacts/<task>/episodes/<episode>/ (its captures, proxy logs and request logs, and `episode.json`: the episode's
 * entry of the member's run.json).
 */
export async function resetMember(
  task: string,
  member: string,
  episode: string | undefined,
  options: PoolOptions,
): Promise<ResetResult> {
  const projectDir = projectDirOf(options);
  const result = await resetStack(member, {
    projectDir,
    env: options.env,
    state: await stateOf(task, member, options),
    collect: episode !== undefined,
    log: options.log,
  });
  if (episode !== undefined) await moveEpisode(projectDir, task, member, episode);
  return result;
}

async function moveEpisode(projectDir: string, task: string, member: string, episode: string): Promise<void> {
  const memberDir = artifactsDirOf(projectDir, member);
  const record = JSON.parse(await readFile(join(memberDir, "run.json"), "utf8")) as {
    episodes?: { episode?: number; dir?: string; requests?: Record<string, { file: string }> }[];
  };
  const last = record.episodes?.at(-1);
  const to = join(artifactsDirOf(projectDir, task), "episodes", episode);
  await rm(to, { recursive: true, force: true });
  await mkdir(join(to, ".."), { recursive: true });
  if (last?.dir !== undefined) await rename(join(memberDir, last.dir), to);
  else await mkdir(to, { recursive: true });
  // Paths in the entry are the episode directory's own from now on.
  const strip = (file: string) =>
    last?.dir !== undefined && file.startsWith(`${last.dir}/`) ? file.slice(last.dir.length + 1) : file;
  const requests = Object.fromEntries(
    Object.entries(last?.requests ?? {}).map(([computer, log]) => [computer, { ...log, file: strip(log.file) }]),
  );
  await writeFile(
    join(to, "episode.json"),
    // The episode's id last: the member's own count of its episodes (run.json's `episode`) is `memberEpisode`.
    JSON.stringify(
      { ...last, memberEpisode: last?.episode, episode, task, stack: member, dir: undefined, requests },
      null,
      2,
    ) + "\n",
  );
}
