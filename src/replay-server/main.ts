// multienv-replay-server: a recorded site served offline from a HAR file (see server.ts). Configured by
// MULTIENV_REPLAY_SERVER_CONFIG and MULTIENV_REPLAY_SERVER_TOKEN. Once the recording is indexed and both listeners
// listen it prints one line
// `{"event":"listening","host","port","controlPort","recording","exchanges","skipped","bodiesMissing","heapMB"}`;
// a bad config, token or recording exits 2 with one line naming the field or the file, a failed listen exits 1.
import { ServiceConfigError } from "../protocol/service-config";
import { logJsonLine } from "../service-kit/log";
import { readReplayServerEnv } from "./config";
import { loadRecording, RecordingError, type Recording } from "./recording";
import { start } from "./server";

function exitWith(message: string, code: number): never {
  process.stderr.write(`multienv-replay-server: ${message}\n`);
  process.exit(code);
}

function load(): ReturnType<typeof readReplayServerEnv> {
  try {
    return readReplayServerEnv(process.env);
  } catch (error) {
    if (error instanceof ServiceConfigError) exitWith(error.message, 2);
    throw error;
  }
}

async function read(file: string): Promise<Recording> {
  try {
    return await loadRecording(file);
  } catch (error) {
    if (error instanceof RecordingError) exitWith(error.message, 2);
    throw error;
  }
}

process.on("uncaughtException", (error) => {
  logJsonLine("crashed", { pid: process.pid, error: error.stack ?? String(error) });
  process.exit(1);
});

async function main(): Promise<void> {
  const { config, token } = load();
  const recording = await read(config.recording);
  const running = await start(config, recording, token).catch((error: Error) =>
    exitWith(`cannot listen on ${config.listen.host}:${config.listen.port}: ${error.message}`, 1),
  );
  // The parsed JSON is garbage once indexed, several times the bodies kept; with --expose-gc (as the image runs it)
  // it is collected now, before the first request, and the heap figure below is what serving holds.
  (globalThis as { gc?: () => void }).gc?.();
  const memory = process.memoryUsage();
  logJsonLine("listening", {
    host: config.listen.host,
    port: running.port,
    controlPort: running.controlPort,
    recording: config.recording,
    exchanges: recording.exchanges.length,
    skipped: recording.skipped,
    bodiesMissing: recording.bodiesMissing,
    heapMB: Math.round((memory.heapUsed + memory.arrayBuffers) / 1e5) / 10,
  });
  const stop = () => running.close().then(() => process.exit(0));
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}

void main();
