// Test helpers for the gateway: the real gateway process (bin/multienv-gateway.js) on loopback, the control token
// the tests give it, and the kit's one-request client carrying that token. Upstream servers and the raw clients are
// the kit's (test/helpers/servers.ts).
import { spawn } from "node:child_process";
import { join } from "node:path";
import { spawnService, type ServiceProcess } from "../helpers/processes";
import { request as plainRequest, type Answer } from "../helpers/servers";

export const TOKEN = "test-control-token-0123456789abcdef";
/** The control token in the gateway's own header, as a runner sends it beside a site's own Authorization. */
export const CONTROL = { "X-Multienv-Token": TOKEN };
/** CONTROL as a raw header line, for requests written byte for byte. */
export const CONTROL_LINE = `X-Multienv-Token: ${TOKEN}\r\n`;

/**
 * The kit's `request` carrying the control token (CONTROL, which the published listener requires) unless `control` is
 * false.
 */
export function request(
  url: string,
  options: Parameters<typeof plainRequest>[1] & { control?: boolean } = {},
): Promise<Answer> {
  const { control, ...rest } = options;
  if (control === false) return plainRequest(url, rest);
  const headers = Array.isArray(rest.headers)
    ? [...rest.headers, ...Object.entries(CONTROL).flat()]
    : { ...CONTROL, ...rest.headers };
  return plainRequest(url, { ...rest, headers });
}

const BIN = join(__dirname, "..", "..", "bin", "multienv-gateway.js");

export interface GatewayProcess extends ServiceProcess {
  url: string;
  port: number;
}

/** Spawns the gateway with `config` (listen defaults to 127.0.0.1:0, one worker) and waits for its listening line. */
export async function startGateway(
  config: Record<string, unknown>,
  env: Record<string, string> = {},
): Promise<GatewayProcess> {
  const full = { listen: { host: "127.0.0.1", port: 0 }, workers: 1, ...config };
  const service = spawnService([BIN], {
    MULTIENV_GATEWAY_CONFIG: JSON.stringify(full),
    MULTIENV_CONTROL_TOKEN: TOKEN,
    ...env,
  });
  const port = (await service.listening).port as number;
  return { ...service, url: `http://127.0.0.1:${port}`, port };
}

/** Runs the gateway bin to completion with a given config text; for config errors. */
export function runGatewayExpectingExit(
  env: Record<string, string | undefined>,
): Promise<{ code: number | null; stderr: string; stdout: string }> {
  return new Promise((resolve) => {
    const merged: NodeJS.ProcessEnv = { ...process.env };
    delete merged.MULTIENV_GATEWAY_CONFIG;
    delete merged.MULTIENV_CONTROL_TOKEN;
    for (const [key, value] of Object.entries(env)) if (value !== undefined) merged[key] = value;
    const child = spawn(process.execPath, [BIN], { env: merged, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    let stdout = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, stdout });
    });
  });
}
