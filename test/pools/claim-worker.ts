// A harness process for the warm pool tests: makes `claims` claims of the task one after another, through the library
// (straight on the store) or through `multienv serve` (`serveUrl`), holds each `holdMs`, then hands the env back.
// Handing back is the store move a successful reset ends with (resetting -> ready), made here at once: the claim path
// needs no engine, and these tests are of the claim path. Prints a JSON line per event with the time it happened, so
// the test can lay every claim's hold on one time line.
import { openLeaseStore } from "../../src/accounts";
import { claimEnv } from "../../src/runner/pools";
import { poolOf } from "../../src/runner/pools/pool";

interface WorkerArgs {
  projectDir: string;
  sqliteFile: string;
  store?: string;
  task: string;
  claims: number;
  holdMs: number;
  waitSeconds: number;
  serveUrl?: string;
  token?: string;
}

const say = (line: Record<string, unknown>) => process.stdout.write(JSON.stringify({ ...line, at: Date.now() }) + "\n");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const args = JSON.parse(process.argv[2]) as WorkerArgs;
  const store = await openLeaseStore({ store: args.store, sqliteFile: args.sqliteFile });
  try {
    for (let i = 0; i < args.claims; i++) {
      say({ event: "asking" });
      let claim: { id: string; stack: string };
      if (args.serveUrl !== undefined) {
        const res = await fetch(`${args.serveUrl}/v1/claims`, {
          method: "POST",
          headers: { authorization: `Bearer ${args.token}`, "content-type": "application/json" },
          body: JSON.stringify({ task: args.task, ttlSeconds: 60, waitSeconds: args.waitSeconds }),
        });
        if (res.status !== 201) throw new Error(`claim answered ${res.status}: ${await res.text()}`);
        claim = (await res.json()) as { id: string; stack: string };
      } else {
        claim = await claimEnv(
          { task: args.task, ttlSeconds: 60, waitSeconds: args.waitSeconds },
          { projectDir: args.projectDir, openStore: store },
        );
      }
      say({ event: "claimed", stack: claim.stack, id: claim.id });
      await sleep(args.holdMs);
      say({ event: "releasing", stack: claim.stack, id: claim.id });
      const back = await store.moveMember(
        poolOf(args.task),
        claim.stack,
        { state: "claimed", holder: claim.id },
        { state: "ready" },
      );
      if (!back) throw new Error(`${claim.stack} was no longer held by ${claim.id}`);
    }
    say({ event: "done" });
  } catch (error) {
    say({ event: "failed", message: (error as Error).message });
    process.exitCode = 1;
  } finally {
    await store.close();
  }
}

void main();
