// A real PostgreSQL server for a test: Debian's postgresql package (scripts/setup.sh installs it), a cluster made by
// initdb in a temp directory and started on a loopback port as the `postgres` user (the server refuses to run as
// root), stopped and removed on cleanup. With a password, the server asks every client for it (scram-sha-256), so a
// test can tell where a client found it.
import { execFileSync, spawn } from "node:child_process";
import { chownSync, existsSync, readdirSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { Client } from "pg";
import { freePort } from "./ports";
import { onCleanup, tempDir } from "./processes";
import { until } from "./until";

/** The newest installed server's binaries (/usr/lib/postgresql/<major>/bin). */
function postgresBin(): string {
  const root = "/usr/lib/postgresql";
  const majors = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  if (majors.length === 0)
    throw new Error("PostgreSQL is not installed: run scripts/setup.sh (apt-get install postgresql)");
  return path.join(root, majors[0], "bin");
}

/** The `postgres` user's uid and gid, which the package creates. */
function postgresUser(): { uid: number; gid: number } {
  const id = (flag: string) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim());
  return { uid: id("-u"), gid: id("-g") };
}

export interface PostgresServer {
  /** postgres://postgres@127.0.0.1:<port>/postgres: never with the password. */
  url: string;
  port: number;
}

/**
 * Starts a fresh PostgreSQL server on loopback; stopped and removed on cleanup. With `password`, user postgres has it
 * and the server wants it of every client; else it trusts every client.
 */
export async function startPostgres(options: { password?: string } = {}): Promise<PostgresServer> {
  const bin = postgresBin();
  const { uid, gid } = postgresUser();
  const dir = tempDir("multienv-postgres-");
  chownSync(dir, uid, gid);
  const data = path.join(dir, "data");
  const auth = ["--auth=trust"];
  if (options.password !== undefined) {
    const pwfile = path.join(dir, "pwfile");
    writeFileSync(pwfile, options.password + "\n", { mode: 0o600 });
    chownSync(pwfile, uid, gid);
    auth.splice(0, 1, "--auth=scram-sha-256", `--pwfile=${pwfile}`);
  }
  execFileSync(path.join(bin, "initdb"), ["-D", data, "-U", "postgres", ...auth, "-E", "UTF8"], {
    uid,
    gid,
    stdio: ["ignore", "ignore", "pipe"],
  });
  const port = await freePort();
  const server = spawn(
    path.join(bin, "postgres"),
    ["-D", data, "-h", "127.0.0.1", "-p", String(port), "-k", dir, "-c", "fsync=off", "-c", "max_connections=100"],
    { uid, gid, stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  server.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  onCleanup(
    () =>
      new Promise<void>((done) => {
        if (server.exitCode !== null) return done();
        server.once("exit", () => done());
        server.kill("SIGINT"); // fast shutdown
      }),
  );
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  await until(
    `PostgreSQL on port ${port}`,
    async () => {
      if (server.exitCode !== null) throw new Error(`postgres exited: ${stderr}`);
      const withPassword = new URL(url);
      if (options.password !== undefined) withPassword.password = encodeURIComponent(options.password);
      const client = new Client({ connectionString: withPassword.href });
      try {
        await client.connect();
        return true;
      } finally {
        await client.end().catch(() => undefined);
      }
    },
    30_000,
    100,
  );
  return { url, port };
}
