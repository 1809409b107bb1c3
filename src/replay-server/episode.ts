// One episode's state: which recorded exchanges were served (so repeats go on in recorded order) and how many
// exchanges were answered exact, fuzzy or missed. `reset` starts the next episode from the beginning. A snapshot is
// what episode-state.ts keeps on disk, so a restarted server goes on where it was.
import type { ReplayCounters } from "../protocol/replay-server-config";

/** An episode as saved: its counters and the recorded exchanges it served. */
export interface EpisodeSnapshot {
  counters: ReplayCounters;
  served: number[];
}

export class Episode {
  private servedSet = new Set<number>();
  private counts: ReplayCounters = { exact: 0, fuzzy: 0, missed: 0 };

  /** Goes on with a saved episode. */
  static from(snapshot: EpisodeSnapshot): Episode {
    const episode = new Episode();
    episode.servedSet = new Set(snapshot.served);
    episode.counts = { ...snapshot.counters };
    return episode;
  }

  get served(): ReadonlySet<number> {
    return this.servedSet;
  }

  get counters(): ReplayCounters {
    return { ...this.counts };
  }

  snapshot(): EpisodeSnapshot {
    return { counters: this.counters, served: [...this.servedSet] };
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
