// The episode kept on disk, so a replay server that restarts (its container's memory limit reached, a crash) goes
// on with the episode rather than starting one: `<stateDir>/episode.json` holds the counters and the recorded
// exchanges served, and the recording they index (its size, time and exchange count: another recording's indexes
// would mean other exchanges). Written whole to a temporary file and renamed over the old one, so a reader finds
// the one before or the one after, never a torn one; once per loop turn that changed it, however many answers the
// turn gave.
import { readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import type { Logger } from "../service-kit/log";
import type { EpisodeSnapshot } from "./episode";

const FILE = "episode.json";

const count = z.number().int().nonnegative();
const stateSchema = z.strictObject({
  recording: z.string(),
  counters: z.strictObject({ exact: count, fuzzy: count, missed: count }),
  served: z.array(count),
});

/** What names a recording for its saved episode: its file's size and time, and its exchanges. */
export function recordingIdentity(file: string, exchanges: number): string {
  const stat = statSync(file);
  return `${stat.size} ${stat.mtimeMs} ${exchanges}`;
}

/** The episode saved in `dir` for `recording`, else undefined (none yet, or another recording's: it is logged). */
export function readEpisodeState(dir: string, recording: string, log: Logger): EpisodeSnapshot | undefined {
  let text: string;
  try {
    text = readFileSync(join(dir, FILE), "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    log("replay-state-unreadable", { file: join(dir, FILE), error: (error as Error).message });
    return undefined;
  }
  let parsed: z.infer<typeof stateSchema>;
  try {
    parsed = stateSchema.parse(JSON.parse(text));
  } catch {
    log("replay-state-unreadable", { file: join(dir, FILE), error: "not an episode this server wrote" });
    return undefined;
  }
  if (parsed.recording !== recording) {
    log("replay-state-unreadable", { file: join(dir, FILE), error: "saved for another recording; a new episode" });
    return undefined;
  }
  return { counters: parsed.counters, served: parsed.served };
}

/** Writes the episode to `dir` at the end of each loop turn `changed` was called in. */
export class EpisodeStateWriter {
  private scheduled = false;
  private failing = false;

  constructor(
    private readonly dir: string,
    private readonly recording: string,
    private readonly snapshot: () => EpisodeSnapshot,
    private readonly log: Logger,
  ) {}

  changed(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.write();
    });
  }

  /** Writes now. */
  write(): void {
    const file = join(this.dir, FILE);
    const temporary = `${file}.${process.pid}.tmp`;
    try {
      writeFileSync(temporary, JSON.stringify({ recording: this.recording, ...this.snapshot() }));
      renameSync(temporary, file);
      if (this.failing) this.log("replay-state-written", { file });
      this.failing = false;
    } catch (error) {
      // Told once per run of failures; serving goes on, and a restart during one starts a new episode.
      if (!this.failing) this.log("replay-state-unwritable", { file, error: (error as Error).message });
      this.failing = true;
    }
  }
}
