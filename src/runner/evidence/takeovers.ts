// A person's takeovers in run.json: each takeover's record (who, when, the agent's reason, the person's inputs
// without their text) is appended to the run record's `takeovers` with the episode it happened in, and the run is
// marked `humanAssisted`; a reset gives the ended episode's record its own takeovers and mark (lifecycle/reset.ts),
// so a grader can exclude or weigh an episode a person helped with.
import { readRunRecord, writeRunRecord, type RunRecord } from "./run-record";
import type { TakeoverRecord } from "./takeover-record";

/** Appends `takeover` to run.json in `artifactsDir`, with the episode under way, and marks the run human-assisted. */
export async function recordTakeover(artifactsDir: string, stack: string, takeover: TakeoverRecord): Promise<void> {
  const record = await readRunRecord(artifactsDir, stack);
  await writeRunRecord(artifactsDir, {
    ...record,
    takeovers: [...(record.takeovers ?? []), { ...takeover, episode: record.episode ?? 1 }],
    humanAssisted: true,
  });
}

/** The ended episode's takeovers and mark, for its record (empty when no person helped). */
export function episodeTakeovers(
  record: RunRecord,
  episode: number,
): { takeovers?: TakeoverRecord[]; humanAssisted?: true } {
  const takeovers = (record.takeovers ?? []).filter((t) => (t.episode ?? 1) === episode);
  return takeovers.length > 0 ? { takeovers, humanAssisted: true } : {};
}
