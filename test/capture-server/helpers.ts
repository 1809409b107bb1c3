// Test helpers: the real capture server process (src/capture-server/main.ts through tsx) on loopback, and tcpdump
// writing rotating captures the way a capture sidecar does.
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { captureServerToken } from "../../src/protocol/auth";
import { spawnService, TOKEN, type ServiceProcess } from "../gateway/helpers";

const MAIN = join(__dirname, "..", "..", "src", "capture-server", "main.ts");

export interface CaptureServerProcess extends ServiceProcess {
  url: string;
  port: number;
  /** The token it requires: captureServerToken(TOKEN, container), what the gateway of the tests derives. */
  token: string;
}

/** The command line a capture server runs with, but through tsx: `node --require tsx/cjs <main.ts>`. */
export const CAPTURE_SERVER_ARGS = ["--require", "tsx/cjs", MAIN];

/** Spawns a capture server over `capturesDir` for `container` on 127.0.0.1 (port 0 unless given). */
export async function startCaptureServer(
  capturesDir: string,
  container: string,
  config: Record<string, unknown> = {},
): Promise<CaptureServerProcess> {
  const token = captureServerToken(TOKEN, container);
  const service = spawnService(CAPTURE_SERVER_ARGS, {
    MULTIENV_CAPTURE_SERVER_CONFIG: JSON.stringify({
      listen: { host: "127.0.0.1", port: 0 },
      capturesDir,
      container,
      ...config,
    }),
    MULTIENV_CAPTURE_TOKEN: token,
  });
  const port = (await service.listening).port as number;
  return { ...service, url: `http://127.0.0.1:${port}`, port, token };
}

/** tcpdump on loopback as a capture sidecar runs it (-U, rotating -C 1 -W 3), for `tcp port <port>`, until stopped. */
export async function startTcpdump(prefix: string, port: number): Promise<{ stop(): Promise<void> }> {
  const child: ChildProcess = spawn(
    "tcpdump",
    ["-i", "lo", "-U", "-Z", "root", "-w", prefix, "-C", "1", "-W", "3", "tcp", "port", String(port)],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  await new Promise<void>((resolve, reject) => {
    child.stderr!.on("data", (chunk) => {
      stderr += chunk;
      if (stderr.includes("listening on")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`tcpdump exited ${code}: ${stderr}`)));
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGINT");
      await exited;
    },
  };
}
