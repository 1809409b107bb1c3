// What the benches share to run their contenders as processes on loopback: free ports, waiting for a listener,
// nginx from a config of their own, and the gateway and site proxy from this checkout, their ports read back from
// their startup lines.
import { spawn, type ChildProcess } from "node:child_process";
import { writeFileSync } from "node:fs";
import net from "node:net";
import { join } from "node:path";

const REPO = join(__dirname, "..");

export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export async function waitForPort(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const up = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, "127.0.0.1");
      socket.once("connect", () => (socket.destroy(), resolve(true)));
      socket.once("error", () => resolve(false));
    });
    if (up) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`nothing listens on ${port}`);
}

/** nginx in the foreground with `body` as its config (pid and error log in `dir`). */
export function startNginx(dir: string, name: string, body: string): ChildProcess {
  const conf = join(dir, `${name}.conf`);
  writeFileSync(
    conf,
    `daemon off;
master_process on;
pid ${dir}/${name}.pid;
error_log ${dir}/${name}-error.log warn;
${body}
`,
  );
  const child = spawn("nginx", ["-c", conf, "-p", dir], { stdio: ["ignore", "ignore", "inherit"] });
  child.on("exit", (code) => code && console.error(`nginx ${name} exited ${code}; see ${dir}/${name}-error.log`));
  return child;
}

/** Starts a node process and resolves with it once a stdout line has `marker`, parsed as JSON. */
export function startNode<T>(
  args: string[],
  env: NodeJS.ProcessEnv,
  marker: string,
): Promise<{ child: ChildProcess; line: T }> {
  const child = spawn(process.execPath, args, {
    cwd: REPO,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    let text = "";
    const onData = (chunk: Buffer) => {
      text += chunk;
      const line = text.split("\n").find((l) => l.includes(marker));
      if (!line) return;
      child.stdout!.off("data", onData);
      child.stdout!.resume();
      resolve({ child, line: JSON.parse(line) as T });
    };
    child.stdout!.on("data", onData);
    child.once("exit", (code) => reject(new Error(`${args.join(" ")} exited ${code} before "${marker}"`)));
  });
}

/** The gateway from this checkout (`bin/multienv-gateway.js`, or `script` through tsx), with `config`. */
export async function startGateway(
  config: Record<string, unknown>,
  token: string,
  nodeArgs: string[] = [],
  script?: string,
): Promise<{ child: ChildProcess; port: number; workers: number }> {
  const args = script
    ? [...nodeArgs, "--require", "tsx/cjs", script]
    : [...nodeArgs, join(REPO, "bin", "multienv-gateway.js")];
  const { child, line } = await startNode<{ port: number; workers: number }>(
    args,
    { MULTIENV_CONTROL_TOKEN: token, MULTIENV_GATEWAY_CONFIG: JSON.stringify(config) },
    '"listening"',
  );
  return { child, port: line.port, workers: line.workers };
}

/** The site proxy from this checkout, with `config` (its listen address and log path included). */
export async function startSiteProxy(
  config: Record<string, unknown>,
  nodeArgs: string[] = [],
): Promise<{ child: ChildProcess; port: number }> {
  const { child, line } = await startNode<{ proxy: { port: number } }>(
    [...nodeArgs, join(REPO, "bin", "multienv-site-proxy.js")],
    {
      MULTIENV_SITE_PROXY_CONFIG: JSON.stringify(config),
      MULTIENV_SITE_PROXY_TOKEN: "bench-site-proxy-token-0123456789abcdef",
    },
    '"startup"',
  );
  return { child, port: line.proxy.port };
}
