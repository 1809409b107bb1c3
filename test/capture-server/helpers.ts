// Test helpers: the real capture server process (src/capture-server/main.ts through tsx) on loopback, and tcpdump
// writing rotating captures the way a capture sidecar does, and capture files as a hostile site could leave them.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { captureServerToken } from "../../src/protocol/auth";
import { spawnService, type ServiceProcess } from "../helpers/processes";
import { TOKEN } from "../gateway/helpers";

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

/** The 24-byte header of a classic pcap file (little-endian, Ethernet): a capture that holds no packet yet. */
export const PCAP_HEADER = Buffer.from("d4c3b2a1020004000000000000000000ffff000001000000", "hex");

/**
 * Writes into `dir` what is named like `<container>`'s captures but is no regular file: `.pcap0` a FIFO (opening it
 * for reading would block), `.pcap1` a link to it, `.pcap2` a directory, `.pcap4` a link to a device; and `.pcap3`, a
 * real capture of PCAP_HEADER and 100 bytes. Returns the names of the ones that must never be served.
 */
export function hostileCaptureFiles(dir: string, container: string): string[] {
  execFileSync("mkfifo", [join(dir, `${container}.pcap0`)]);
  symlinkSync(join(dir, `${container}.pcap0`), join(dir, `${container}.pcap1`));
  mkdirSync(join(dir, `${container}.pcap2`));
  symlinkSync("/dev/zero", join(dir, `${container}.pcap4`));
  writeFileSync(join(dir, `${container}.pcap3`), Buffer.concat([PCAP_HEADER, Buffer.alloc(100, 1)]));
  return [0, 1, 2, 4].map((n) => `${container}.pcap${n}`);
}
