// A person's takeovers in run.json: each takeover's record (who, when, the agent's reason, the person's inputs
// without their text) is appended to the run record's `takeovers` with the episode it happened in, and the run is
// marked `humanAssisted`; a reset gives the ended episode's record its own takeovers and mark (lifecycle/reset.ts),
// so a grader can exclude or weigh an episode a person helped with.
import { readRunRecord, writeRunRecord, type RunRecord } from "./run-record";
import type { TakeoverRecord } from "./takeover-record";

/**
 * Puts `takeover` in run.json in `artifactsDir` and marks the run human-assisted: in place of the record of the same
 * takeover (its computer and start) written before, which keeps its episode, else appended with the episode under way.
 */
export async function recordTakeover(artifactsDir: string, stack: string, takeover: TakeoverRecord): Promise<void> {
  const record = await readRunRecord(artifactsDir, stack);
  const takeovers = record.takeovers ?? [];
  const at = takeovers.findIndex((t) => t.computer === takeover.computer && t.start === takeover.start);
  const next =
    at === -1
      ? [...takeovers, { ...takeover, episode: record.episode ?? 1 }]
      : takeovers.map((t, i) => (i === at ? { ...takeover, episode: t.episode } : t));
  await writeRunRecord(artifactsDir, { ...record, takeovers: next, humanAssisted: true });
}

/** The ended episode's takeovers and mark, for its record (empty when no person helped). */
export function episodeTakeovers(
  record: RunRecord,
  episode: number,
): { takeovers?: TakeoverRecord[]; humanAssisted?: true } {
  const takeovers = (record.takeovers ?? []).filter((t) => (t.episode ?? 1) === episode);
  return takeovers.length > 0 ? { takeovers, humanAssisted: true } : {};
}
