// The runner's engine client (src/engines/docker.ts): the ssh arguments of a remote engine's connections, a local
// engine over its unix socket (a fake engine here), and each container of a stack's state found on the engine its
// docker provider names. The SSH path itself is test/providers/ssh.test.ts, against a real sshd.
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engineConnection } from "../../src/plan/targets/ssh";
import {
  DEFAULT_DOCKER_SOCKET,
  dialStdioArgs,
  engineClient,
  isNotFound,
  stackContainers,
  type StateResource,
} from "../../src/engines/docker";

describe("dialStdioArgs", () => {
  it("runs docker system dial-stdio as the docker provider does: user and port as options, then sshOpts, then the host", () => {
    expect(dialStdioArgs("ssh://ops@10.0.0.5:2222", ["-o", "BatchMode=yes"])).toEqual([
      "-l",
      "ops",
      "-p",
      "2222",
      "-o",
      "BatchMode=yes",
      "-T",
      "--",
      "10.0.0.5",
      "docker",
      "system",
      "dial-stdio",
    ]);
    // Without a user or port, ssh's own defaults; an IPv6 address without its brackets; a user as written.
    expect(dialStdioArgs("ssh://[2001:db8::5]")).toEqual(["-T", "--", "2001:db8::5", "docker", "system", "dial-stdio"]);
    expect(dialStdioArgs("ssh://ci%2Brunner@host.example").slice(0, 2)).toEqual(["-l", "ci+runner"]);
  });

  it("puts every option of engineConnection before the `--`, so none is read as the remote command", () => {
    const connection = engineConnection(
      {
        host: "192.0.2.10",
        port: 2222,
        user: "deploy",
        hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIkkkkkkkkkk1 root@host1",
        identityFile: "/keys/lab",
      },
      "/tmp/multienv-ssh-test",
    );
    const args = dialStdioArgs(connection.host, connection.sshOpts);
    const end = args.indexOf("--");
    expect(args.slice(0, end)).toEqual(["-l", "deploy", "-p", "2222", ...connection.sshOpts, "-T"]);
    expect(args.slice(end + 1)).toEqual(["192.0.2.10", "docker", "system", "dial-stdio"]);
  });

  it("refuses a host that is not ssh://", () => {
    expect(() => dialStdioArgs("tcp://10.0.0.5:2375")).toThrow("expected ssh://user@host[:port]");
    expect(() => dialStdioArgs("ssh://")).toThrow("expected ssh://user@host[:port]");
  });
});

describe("engineClient on a local socket", () => {
  const socket = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "multienv-engine-")), "docker.sock");
  const seen: string[] = [];
  let server: http.Server;
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      if (req.url?.includes("/containers/missing/")) {
        res.writeHead(404, { "content-type": "application/json" });
        return res.end(JSON.stringify({ message: "No such container: missing" }));
      }
      if (req.url?.includes("/restart")) return res.writeHead(204).end();
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ Version: "fake", url: req.url }));
    });
    await new Promise<void>((r) => server.listen(socket, r));
  });
  afterAll(() => server?.close());

  it("reaches a unix:// host, and DOCKER_HOST when no host is given", async () => {
    expect(((await engineClient({ host: `unix://${socket}` }).version()) as { Version: string }).Version).toBe("fake");
    const before = process.env.DOCKER_HOST;
    process.env.DOCKER_HOST = `unix://${socket}`;
    try {
      await engineClient({}).getContainer("t-shop-server").restart({ t: 1 });
    } finally {
      if (before === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = before;
    }
    expect(seen.at(-1)).toMatch(/^POST .*\/containers\/t-shop-server\/restart\?t=1$/);
  });

  it("says when the engine has no such container, with the engine's message", async () => {
    const error = await engineClient({ host: `unix://${socket}` })
      .getContainer("missing")
      .inspect()
      .catch((e: unknown) => e);
    expect(isNotFound(error)).toBe(true);
    expect(String((error as Error).message)).toContain("No such container: missing");
    expect(isNotFound(new Error("connect ENOENT"))).toBe(false);
  });

  it("uses the default socket when neither host nor DOCKER_HOST says otherwise, and refuses other schemes", () => {
    const before = process.env.DOCKER_HOST;
    delete process.env.DOCKER_HOST;
    try {
      const modem = (engineClient() as unknown as { modem: { socketPath?: string } }).modem;
      expect(modem.socketPath).toBe(DEFAULT_DOCKER_SOCKET);
    } finally {
      if (before !== undefined) process.env.DOCKER_HOST = before;
    }
    expect(() => engineClient({ host: "tcp://10.0.0.5:2375" })).toThrow("expected unix:///path or ssh://user@host");
  });
});

describe("stackContainers", () => {
  const urn = (type: string, name: string) => `urn:pulumi:s::multienv::${type}::${name}`;
  const PROVIDER = "pulumi:providers:docker";
  const CONTAINER = "docker:index/container:Container";
  const labels = (map: Record<string, string>) => Object.entries(map).map(([label, value]) => ({ label, value }));
  const sshOpts = ["-o", "StrictHostKeyChecking=yes", "-o", "KnownHostsCommand=/bin/echo a ssh-ed25519 AAAA"];
  const container = (name: string, provider: string, map: Record<string, string>): StateResource => ({
    urn: urn(CONTAINER, name),
    id: `${name}-0123`,
    type: CONTAINER,
    provider,
    inputs: { name, image: "sha256:abc", labels: labels({ "multienv.stack": "s", ...map }) },
  });

  it("finds each container's engine through the docker provider it names, as the state holds the provider", () => {
    const state: StateResource[] = [
      { urn: urn("pulumi:pulumi:Stack", "multienv-s"), type: "pulumi:pulumi:Stack" },
      // The local engine: the provider has no host (DOCKER_HOST, else the default socket).
      { urn: urn(PROVIDER, "s-engine-provider"), id: "p1", type: PROVIDER, inputs: { version: "5.2.0" } },
      // A remote engine: the SDK sends a provider's list config as JSON text, and the state keeps it so.
      {
        urn: urn(PROVIDER, "s-desktop-engine-provider"),
        id: "p2",
        type: PROVIDER,
        inputs: { host: "ssh://ops@10.0.0.6:22", sshOpts: JSON.stringify(sshOpts), version: "5.2.0" },
      },
      // Another remote engine whose options are a list already.
      {
        urn: urn(PROVIDER, "s-other-engine-provider"),
        id: "p3",
        type: PROVIDER,
        inputs: { host: "ssh://ops@10.0.0.7:22", sshOpts },
      },
      container("s-gateway", `${urn(PROVIDER, "s-engine-provider")}::p1`, { "multienv.role": "gateway" }),
      container("s-shop-server", `${urn(PROVIDER, "s-engine-provider")}::p1`, {
        "multienv.role": "server",
        "multienv.site": "shop",
      }),
      container("s-shop-server-capture", `${urn(PROVIDER, "s-engine-provider")}::p1`, {
        "multienv.role": "capture",
        "multienv.capture.site": "shop",
        "multienv.capture.role": "server",
      }),
      container("s-desktop-proxy", `${urn(PROVIDER, "s-desktop-engine-provider")}::p2`, {
        "multienv.role": "site-proxy",
        "multienv.computer": "desktop",
      }),
      container("s-other-browser", `${urn(PROVIDER, "s-other-engine-provider")}::p3`, {
        "multienv.role": "browser",
        "multienv.computer": "other",
      }),
      // Not containers, or not created yet (no inputs): not listed.
      {
        urn: urn("docker:index/network:Network", "s-env"),
        type: "docker:index/network:Network",
        provider: `${urn(PROVIDER, "s-engine-provider")}::p1`,
        inputs: { name: "s-env" },
      },
      { urn: urn(CONTAINER, "s-pending"), type: CONTAINER },
    ];
    expect(stackContainers(state)).toEqual([
      { name: "s-gateway", role: "gateway", engine: {} },
      { name: "s-shop-server", role: "server", site: "shop", engine: {} },
      { name: "s-shop-server-capture", role: "capture", captureOf: "shop-server", engine: {} },
      {
        name: "s-desktop-proxy",
        role: "site-proxy",
        computer: "desktop",
        engine: { host: "ssh://ops@10.0.0.6:22", sshOpts },
      },
      {
        name: "s-other-browser",
        role: "browser",
        computer: "other",
        engine: { host: "ssh://ops@10.0.0.7:22", sshOpts },
      },
    ]);
  });
});
