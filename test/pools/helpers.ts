// The warm pool tests' helpers: a project directory of their own (its own embedded lease store), pool members
// registered in the store as ready without a deploy (the claim path reads the store and the handles alone), and
// harness processes (claim-worker.ts) whose lines are read back.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import type { LeaseStore } from "../../src/accounts";
import { memberName, poolOf, writeHandles, writeSettings } from "../../src/runner/pools";
import type { PoolSettings } from "../../src/runner/pools/pool";
import { onCleanup, ROOT, tempDir } from "../helpers/processes";

export interface Project {
  projectDir: string;
  /** The embedded store's file, as the pools find it (warmStoreFile of the project's state). */
  sqliteFile: string;
}

/** A project directory with a Pulumi.yaml and the task's stack file, and its state under .multienv/state. */
export function project(task: string): Project {
  const projectDir = tempDir("multienv-pools-");
  writeFileSync(path.join(projectDir, "Pulumi.yaml"), "name: multienv\nruntime: nodejs\n");
  mkdirSync(path.join(projectDir, "stacks"));
  writeFileSync(path.join(projectDir, "stacks", `Pulumi.${task}.yaml`), "config: {}\n");
  return { projectDir, sqliteFile: path.join(projectDir, ".multienv", "state", "accounts.sqlite") };
}

/** The process's environment with the state in the project (what backendUrlFor reads), nothing else of the test's. */
export function envOf(p: Project): NodeJS.ProcessEnv {
  return { ...process.env, PULUMI_BACKEND_URL: `file://${path.join(p.projectDir, ".multienv", "state")}` };
}

/**
 * Registers `size` members of the task as ready, with handles naming `cdpUrl` and a made-up agent token each: no
 * deploy, since a claim reads only the store and the handles. `settings` are the pool's beyond its size (a stack file
 * hash is written into the handles too, so a keeper sees the members as of the current file).
 */
export async function registerReady(
  store: LeaseStore,
  p: Project,
  task: string,
  size: number,
  cdpUrl = "http://127.0.0.1:9/cdp",
  settings: Omit<PoolSettings, "size"> = {},
): Promise<string[]> {
  await writeSettings(store, task, { size, ...settings });
  const names: string[] = [];
  for (let n = 1; n <= size; n++) {
    const member = memberName(task, n);
    await writeHandles(p.projectDir, task, {
      stack: member,
      stackFileHash: settings.stackFileHash,
      computers: { agent: { cdpUrl, agentToken: `agent-token-${member}`, startTabs: ["http://shop.test/"] } },
    });
    await store.setMember(poolOf(task), member, "ready");
    names.push(member);
  }
  return names;
}

export interface Worker {
  child: ChildProcess;
  lines: Record<string, any>[];
  exited: Promise<number | null>;
}

export function startWorker(args: Record<string, unknown>): Worker {
  const child = spawn(
    process.execPath,
    ["--import=tsx", path.join(__dirname, "claim-worker.ts"), JSON.stringify(args)],
    {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  const lines: Record<string, any>[] = [];
  let buffered = "";
  child.stdout!.setEncoding("utf8").on("data", (text: string) => {
    buffered += text;
    let newline;
    while ((newline = buffered.indexOf("\n")) !== -1) {
      lines.push(JSON.parse(buffered.slice(0, newline)) as Record<string, any>);
      buffered = buffered.slice(newline + 1);
    }
  });
  const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)));
  onCleanup(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    return exited;
  });
  return { child, lines, exited };
}

/** Each claim's hold, from the line after it was granted to the line before it was handed back. */
export function holds(workers: Worker[]): { stack: string; id: string; from: number; to: number }[] {
  const all = workers.flatMap((w) => w.lines);
  return all
    .filter((l) => l.event === "claimed")
    .map((c) => ({
      stack: c.stack,
      id: c.id,
      from: c.at,
      to: all.find((l) => l.event === "releasing" && l.id === c.id)!.at,
    }));
}

/** The most holds at one time. */
export function mostAtOnce(spans: { from: number; to: number }[]): number {
  let most = 0;
  for (const s of spans) most = Math.max(most, spans.filter((o) => o.from <= s.from && s.from < o.to).length);
  return most;
}
