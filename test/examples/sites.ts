// The sample sites as real processes on loopback: their sources run with tsx, as the images run their bundles.
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { freePort } from "../helpers/ports";

export const REPO = path.resolve(__dirname, "../..");
export const SITES = {
  shopServer: "examples/sites/shop-server/server.ts",
  shopFrontend: "examples/sites/shop-frontend/server.ts",
  liveServer: "examples/sites/live-server/server.ts",
} as const;

const children: ChildProcess[] = [];

export function runSite(entry: string, env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, [path.join(REPO, "node_modules/tsx/dist/cli.mjs"), path.join(REPO, entry)], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  children.push(child);
  return child;
}

/** Starts the site on a free port with `env` and answers its base URL once it answers /ready. */
export async function startSite(entry: string, env: Record<string, string> = {}): Promise<string> {
  const port = await freePort();
  const child = runSite(entry, { ...env, PORT: String(port) });
  let stderr = "";
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${entry} exited ${child.exitCode}: ${stderr}`);
    const ready = await fetch(`${base}/ready`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) return base;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${entry} did not answer /ready: ${stderr}`);
}

/** The settings and domains a deploy hands a site server, as its environment. */
export function siteEnv(settings: unknown, domains: string[]): Record<string, string> {
  return { AGENTENV_WEBSITE_SETTINGS: JSON.stringify(settings), AGENTENV_WEBSITE_DOMAINS: JSON.stringify(domains) };
}

export function stopSites(): void {
  for (const child of children.splice(0)) child.kill();
}
