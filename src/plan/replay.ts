// A live site served from a recording (`websites.<name>.replay`): the rules, the replay server's container and
// config, and what the plan says of it. A replayed site keeps its names and its server (card, data plane, /ready,
// /session) but is no longer live: its names are routed to the gateway as a synthetic site's are, the gateway's
// frontend for it is the replay server, and neither container has any egress.
import type { ReplayServerConfig } from "../protocol/replay-server-config";
import { problem } from "./problems";
import { RECORDING_PATH, REPLAY_CONTROL_PORT, REPLAY_PORT, REPLAY_STATE_DIR, topologyNames } from "./topology";
import type {
  PlannedReplay,
  PlannedWebsite,
  Problem,
  RecordingFile,
  ReplayedWebsiteMark,
  WebsiteConfig,
} from "./types";

/** True when the site is reached on the real web: a live site that is not replayed. The one place this is said. */
export function servedLive(website: { live: boolean; replay?: unknown }): boolean {
  return website.live && website.replay === undefined;
}

/** The names a replayed site answers at: its domains and its allowed hosts (a recording holds its CDNs' too). */
export function replayedNames(website: Pick<WebsiteConfig, "domains" | "allowHosts">): string[] {
  return [...website.domains, ...website.allowHosts];
}

/** The image that carries one recording, tagged by its SHA-256: the same recording is the same image everywhere. */
export function recordingImage(sha256: string): string {
  return `multienv/replay-recording:${sha256}`;
}

/** The replay server's own image, which a recording image is built FROM. */
export const REPLAY_SERVER_IMAGE = "multienv/replay-server:latest";

/** The Dockerfile of a recording image, whose build context holds the HAR as `recording.har`. */
export function recordingDockerfile(): string {
  return [
    `# A recording served by the replay server: built by the deploy (src/program.ts), tagged by the HAR's SHA-256.`,
    `FROM ${REPLAY_SERVER_IMAGE}`,
    `COPY recording.har ${RECORDING_PATH}`,
    "",
  ].join("\n");
}

/** What is wrong with a site's `replay` taken alone (whether the file reads is src/config/recordings.ts's). */
export function replayProblems(site: string, website: WebsiteConfig): Problem[] {
  if (website.replay === undefined) return [];
  const path = ["websites", site, "replay"];
  if (!website.live)
    return [
      problem(path, "only a live site is replayed (a synthetic site is served by its own images); remove replay"),
    ];
  return [];
}

/** The largest request body, and WebSocket message, a replay server holds to compare. */
export const REPLAY_MAX_BODY_BYTES = 16 * 1024 * 1024;

const MIB = 1024 * 1024;

/**
 * A replay server's memory limit: node and the server at rest (about 60 MiB resident), its recording (about 1.4x
 * the file once indexed, 3.1x at the peak of loading, when the HAR's JSON is parsed whole: 4x is allowed), and a body
 * at the limit being compared (its bytes, the text of a form, 8 bytes a field while its fields are sorted: at most
 * about 12x a body of one-digit JSON numbers; 16x is allowed). Past the limit the container restarts and the server
 * goes on with its episode (src/replay-server/episode-state.ts).
 */
export function replayServerMemoryMiB(recordingBytes: number, maxBodyBytes: number): number {
  return Math.ceil((128 * MIB + 4 * recordingBytes + 16 * maxBodyBytes) / MIB);
}

/** The replay server of a replayed site, from its recording as read. */
export function plannedReplay(
  stack: string,
  site: string,
  website: WebsiteConfig,
  recording: RecordingFile,
): PlannedReplay {
  const replay = website.replay!;
  return {
    containerName: topologyNames.replayContainer(stack, site),
    alias: topologyNames.replayAlias(site),
    port: REPLAY_PORT,
    controlPort: REPLAY_CONTROL_PORT,
    file: replay.file,
    recording: { ...recording },
    recordingImage: recordingImage(recording.sha256),
    ignoreParams: [...replay.ignoreParams],
    ignoreBodyFields: [...replay.ignoreBodyFields],
    maxBodyBytes: REPLAY_MAX_BODY_BYTES,
    memoryMiB: replayServerMemoryMiB(recording.bytes, REPLAY_MAX_BODY_BYTES),
  };
}

/** `MULTIENV_REPLAY_SERVER_CONFIG` of a replayed site's replay server. */
export function replayServerServiceConfig(replay: PlannedReplay): ReplayServerConfig {
  return {
    listen: { host: "0.0.0.0", port: replay.port },
    control: { host: "0.0.0.0", port: replay.controlPort },
    recording: RECORDING_PATH,
    ignoreParams: [...replay.ignoreParams],
    ignoreBodyFields: [...replay.ignoreBodyFields],
    maxBodyBytes: replay.maxBodyBytes,
    headersTimeoutMs: 30_000,
    stateDir: REPLAY_STATE_DIR,
  };
}

/** The replay server's site listener: the gateway's frontend upstream for the replayed site. */
export function replayUrl(replay: Pick<PlannedReplay, "alias" | "port">): string {
  return `http://${replay.alias}:${replay.port}`;
}

/** The replay server's control listener, for the gateway. */
export function replayControlUrl(replay: Pick<PlannedReplay, "alias" | "controlPort">): string {
  return `http://${replay.alias}:${replay.controlPort}`;
}

/** The outputs' marks of the replayed sites. */
export function replayedWebsiteMarks(websites: PlannedWebsite[]): ReplayedWebsiteMark[] {
  return websites.flatMap((w) =>
    w.replay ? [{ name: w.name, recording: w.replay.file, sha256: w.replay.recording.sha256 }] : [],
  );
}
