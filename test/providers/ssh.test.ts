// The SSH path to a Docker host against a real sshd on loopback, as the docker provider and the runner's engine
// client take it: `ssh <sshOpts> ... docker system dial-stdio` with engineConnection's host and options, the pinned
// host key and no other, and the shell commands' shared connection (sshSetup) carrying those sessions once it is
// up. Sessions' `docker system dial-stdio` reaches a fake engine on a unix socket.
import { execFile } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engineConnection, sshAlias, sshRun, sshSetup, type SshEndpoint } from "../../src/plan/targets/ssh";
import { sshDir } from "../../src/providers/ssh";
import { engineClient } from "../../src/engines/docker";
import { keyPair, startSshd, type TestSshd } from "../helpers/sshd";

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-ssh-test-"));
const socket = path.join(dir, "docker.sock");
let engine: http.Server;
let sshd: TestSshd;
let endpoint: SshEndpoint;
const clients: ReturnType<typeof engineClient>[] = [];

/** An engine client of the test: its kept-alive connections (ssh processes) are closed at the end. */
function client(connection: { host: string; sshOpts: string[] }): ReturnType<typeof engineClient> {
  const made = engineClient(connection);
  clients.push(made);
  return made;
}

beforeAll(async () => {
  engine = http.createServer((req, res) => {
    // A little latency, so parallel requests overlap and each needs its own session.
    setTimeout(
      () => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ url: req.url })),
      50,
    );
  });
  await new Promise<void>((r) => engine.listen(socket, r));
  sshd = await startSshd({ dockerSocket: socket });
  endpoint = {
    host: sshd.host,
    port: sshd.port,
    user: sshd.user,
    hostKey: sshd.hostKey,
    identityFile: sshd.identityFile,
  };
});
afterAll(async () => {
  for (const made of clients) (made as unknown as { modem: { agent?: http.Agent } }).modem.agent?.destroy();
  // The shared connection the shell commands started, so no master outlives the test's sshd.
  if (endpoint) await sh(`${sshSetup(endpoint)}\nssh -F "$cfg" -O exit "$alias" 2>/dev/null || true`);
  await sshd?.stop();
  engine?.close();
});

const sh = (script: string) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    execFile("/bin/sh", ["-c", script], { timeout: 30_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );

/** `n` parallel Engine API requests (GET /containers/<name>/json), each answered with its own path. */
async function parallelRequests(client: ReturnType<typeof engineClient>, n: number): Promise<string[]> {
  const answers = await Promise.all(
    Array.from({ length: n }, (_, i) => client.getContainer(`c${i}`).inspect() as Promise<unknown>),
  );
  return answers.map((a) => String((a as { url: string }).url).replace(/^\/v[\d.]+/, ""));
}

const expected = (n: number) => Array.from({ length: n }, (_, i) => `/containers/c${i}/json`);

describe("the SSH path to a Docker host", () => {
  it("answers 24 parallel Engine API requests with the provider's host and sshOpts alone, no shared connection up", async () => {
    // A directory of its own: no master there, as for a provider in a new shell with no file of sshSetup's.
    const fresh = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-ssh-fresh-"));
    const before = sshd.logins();
    expect(await parallelRequests(client(engineConnection(endpoint, fresh)), 24)).toEqual(expected(24));
    // Each connection authenticates on its own; the client keeps at most 8 and reuses them.
    const logins = sshd.logins() - before;
    expect(logins).toBeGreaterThanOrEqual(1);
    expect(logins).toBeLessThanOrEqual(8);
  }, 60_000);

  it("refuses a host presenting any other key than the pinned one", async () => {
    const [, otherKey] = keyPair(dir, "impostor");
    const wrong = { ...endpoint, hostKey: otherKey };
    const refused = client(engineConnection(wrong, sshDir()));
    await expect(refused.version()).rejects.toThrow(/ssh to ssh:\/\/\S+ exited 255: Host key verification failed/);
    const shell = await sh(`${sshSetup(wrong)}\n${sshRun("true")}`);
    expect(shell.code).toBe(255);
    expect(shell.stderr).toMatch(/Host key verification failed/);
  }, 60_000);

  it("gives the shell commands one shared connection and config", async () => {
    const before = sshd.logins();
    const results = await Promise.all(
      Array.from({ length: 6 }, () => sh(`${sshSetup(endpoint)}\n${sshRun("'echo $DOCKER_HOST'")}`)),
    );
    for (const r of results) {
      expect(r.stderr).toBe("");
      expect(r.stdout.trim()).toBe(`unix://${socket}`);
    }
    // No master was up: exactly one of these starts it, and the others wait for it under the lock.
    expect(sshd.logins() - before).toBe(1);
    const check = await sh(`${sshSetup(endpoint)}\nssh -F "$cfg" -O check "$alias"`);
    expect(check.stderr).toMatch(/Master running/);
  }, 60_000);

  it("carries the provider's and the runner's sessions on that shared connection while it is up", async () => {
    const master = await sh(`${sshSetup(endpoint)}\nssh -F "$cfg" -O check "$alias"`);
    expect(master.stderr).toMatch(/Master running/);
    const before = sshd.logins();
    // The directory the components give engineConnection: the one sshSetup's files and socket are in.
    expect(await parallelRequests(client(engineConnection(endpoint, sshDir())), 24)).toEqual(expected(24));
    // Another client (another provider operation, or reset) finds the same connection.
    expect(await parallelRequests(client(engineConnection(endpoint, sshDir())), 4)).toEqual(expected(4));
    expect(sshd.logins() - before).toBe(0);
  }, 60_000);

  it("names each host by address, user, port and key, so a new key never meets an old connection", () => {
    expect(sshAlias(endpoint)).toMatch(/^multienv-[0-9a-f]{16}$/);
    expect(sshAlias({ ...endpoint, port: 2222 })).not.toBe(sshAlias(endpoint));
    expect(
      sshAlias({ ...endpoint, hostKey: `${endpoint.hostKey.split(" ").slice(0, 2).join(" ")} other-comment` }),
    ).toBe(sshAlias(endpoint));
    expect(() => sshAlias({ ...endpoint, hostKey: "not a key" })).toThrow(
      /expected a public key line such as "ssh-ed25519 AAAA..."/,
    );
  });
});
