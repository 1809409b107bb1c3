// The SSH path to a Docker host against a real sshd on loopback: one shared connection per host however many
// requests run at once, the pinned host key and no other, and the shell commands' setup reaching the same
// connection. Sessions' `docker system dial-stdio` reaches a fake engine on a unix socket.
import { execFile } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sshAlias, sshRun, sshSetup, type SshEndpoint } from "../../src/plan/ssh";
import { dockerApi } from "../../src/providers/docker-api";
import { keyPair, startSshd, type TestSshd } from "../helpers/sshd";

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-ssh-test-"));
const socket = path.join(dir, "docker.sock");
let engine: http.Server;
let sshd: TestSshd;
let endpoint: SshEndpoint;
let requests = 0;

beforeAll(async () => {
  engine = http.createServer((req, res) => {
    requests++;
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
  await sshd?.stop();
  engine?.close();
});

const sh = (script: string) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    execFile("/bin/sh", ["-c", script], { timeout: 30_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );

describe("the SSH path to a Docker host", () => {
  it("runs 24 parallel Engine API requests over one authenticated connection", async () => {
    const before = sshd.logins();
    const api = dockerApi({ host: `ssh://${sshd.user}@${sshd.host}:${sshd.port}`, ssh: endpoint });
    try {
      const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => api.request("GET", `/v1.41/info?n=${i}`)));
      expect(answers.map((a) => a.url)).toEqual(Array.from({ length: 24 }, (_, i) => `/v1.41/info?n=${i}`));
    } finally {
      api.close();
    }
    // A second client (another provider operation) finds the same connection.
    const again = dockerApi({ host: "ssh://again", ssh: endpoint });
    try {
      await again.request("GET", "/v1.41/version");
    } finally {
      again.close();
    }
    expect(sshd.logins() - before).toBe(1);
    expect(requests).toBeGreaterThanOrEqual(25);
  }, 60_000);

  it("refuses a host presenting any other key than the pinned one", async () => {
    const [, otherKey] = keyPair(dir, "impostor");
    const wrong = { ...endpoint, hostKey: otherKey };
    const api = dockerApi({ host: "ssh://wrong", ssh: wrong });
    try {
      await expect(api.request("GET", "/v1.41/version")).rejects.toThrow(
        /ssh to ssh:\/\/wrong exited 255: Host key verification failed/,
      );
    } finally {
      api.close();
    }
    const shell = await sh(`${sshSetup(wrong)}\n${sshRun("true")}`);
    expect(shell.code).toBe(255);
    expect(shell.stderr).toMatch(/Host key verification failed/);
  }, 60_000);

  it("gives the shell commands the same shared connection and config", async () => {
    const before = sshd.logins();
    const results = await Promise.all(
      Array.from({ length: 6 }, () => sh(`${sshSetup(endpoint)}\n${sshRun("'echo $DOCKER_HOST'")}`)),
    );
    for (const r of results) {
      expect(r.stderr).toBe("");
      expect(r.stdout.trim()).toBe(`unix://${socket}`);
    }
    // One master, already up from the test before or started by exactly one of these.
    expect(sshd.logins() - before).toBeLessThanOrEqual(1);
    const check = await sh(`${sshSetup(endpoint)}\nssh -F "$cfg" -O check "$alias"`);
    expect(check.stderr).toMatch(/Master running/);
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
