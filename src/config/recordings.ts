// The replayed sites' recordings read from disk (`websites.<name>.replay`), for the program and `multienv check`:
// each file resolved against the project directory, read as the replay server reads it (its `loadRecording`, so a
// file the server would refuse is refused here, before a deploy), and hashed (its SHA-256 tags the image carrying
// it and is in the outputs). The plan is pure and gets what this read.
import { createHash } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { isAbsolute, resolve } from "node:path";
import { loadRecording, RecordingError } from "../replay-server/recording";
import { covers } from "../protocol/host-names";
import { problem } from "../plan/problems";
import { replayedNames } from "../plan/replay";
import type { Problem, RecordingFile, StackConfig } from "../plan/types";

export interface RecordingsRead {
  /** Site -> its recording, for each replayed site whose file reads and serves some of its names. */
  recordings: Record<string, RecordingFile>;
  problems: Problem[];
  warnings: Problem[];
}

/** `host[:port]` without its port, as a site's names are written. */
function hostOnly(host: string): string {
  const colon = host.lastIndexOf(":");
  return colon > host.lastIndexOf("]") ? host.slice(0, colon) : host;
}

/** Every replayed live site's recording of `config`, read with relative paths taken from `projectDir`. */
export async function readRecordings(config: Pick<StackConfig, "websites" | "computers">, projectDir: string) {
  const read: RecordingsRead = { recordings: {}, problems: [], warnings: [] };
  for (const site of Object.keys(config.websites).sort()) {
    const website = config.websites[site];
    // A replay on a synthetic site is the plan's problem; there is nothing to read for it.
    if (!website.live || website.replay === undefined) continue;
    const file = website.replay.file;
    const path = ["websites", site, "replay"];
    const full = isAbsolute(file) ? file : resolve(projectDir, file);
    if (!existsSync(full) || !statSync(full).isFile()) {
      read.problems.push(
        problem(
          path,
          `the recording ${full} does not exist; record the site first (a HAR file: the request log's, Chromium's or Playwright's recordHar) or fix the path, which is relative to the project directory`,
        ),
      );
      continue;
    }
    let hosts: Set<string>;
    let urls: Set<string>;
    try {
      const recording = await loadRecording(full);
      hosts = new Set(recording.exchanges.map((e) => hostOnly(e.host)));
      urls = new Set(recording.exchanges.map((e) => `${e.host}${e.target.split("?", 1)[0]}`));
    } catch (error) {
      if (!(error instanceof RecordingError)) throw error;
      read.problems.push(problem(path, error.message));
      continue;
    }
    const names = replayedNames(website);
    if (![...hosts].some((host) => names.some((name) => covers(name, host)))) {
      const held = [...hosts].slice(0, 5).join(", ") || "no host at all";
      read.problems.push(
        problem(
          path,
          `the recording ${full} holds no entry for any of the site's names (${names.join(", ")}); it holds ${held}. Record this site, or fix domains`,
        ),
      );
      continue;
    }
    const bytes = readFileSync(full);
    read.recordings[site] = {
      path: full,
      sha256: createHash("sha256").update(bytes).digest("hex"),
      bytes: bytes.length,
    };
    for (const computer of Object.keys(config.computers).sort()) {
      const { routesSites, startTabs } = config.computers[computer];
      if (!routesSites) continue;
      startTabs.forEach((tab, index) => {
        if (!URL.canParse(tab)) return;
        const url = new URL(tab);
        if (!names.some((name) => covers(name, url.hostname))) return;
        if (urls.has(`${url.host}${url.pathname}`)) return;
        read.warnings.push(
          problem(
            ["computers", computer, "startTabs", index],
            `${tab} is not in the recording ${full} of replayed site ${site}, so the tab opens the replay server's 404 (a miss); record that page, or change the tab`,
          ),
        );
      });
    }
  }
  return read;
}
