// One episode's state: which recorded exchanges were served (so repeats go on in recorded order) and how many
// exchanges were answered exact, fuzzy or missed. `reset` starts the next episode from the beginning.
import type { ReplayCounters } from "../protocol/replay-server-config";

export class Episode {
  private servedSet = new Set<number>();
  private counts: ReplayCounters = { exact: 0, fuzzy: 0, missed: 0 };

  get served(): ReadonlySet<number> {
    return this.servedSet;
  }

  get counters(): ReplayCounters {
    return { ...this.counts };
  }

  /** Records an answer: `index` the exchange served, undefined for a miss, negative for an answer synthesised. */
  record(kind: "exact" | "fuzzy" | "miss", index?: number): void {
    if (index !== undefined && index >= 0) this.servedSet.add(index);
    if (kind === "miss") this.counts.missed += 1;
    else this.counts[kind] += 1;
  }

  /** Starts a new episode; returns the counters of the one that ended. */
  reset(): ReplayCounters {
    const ended = this.counters;
    this.servedSet = new Set();
    this.counts = { exact: 0, fuzzy: 0, missed: 0 };
    return ended;
  }
}
