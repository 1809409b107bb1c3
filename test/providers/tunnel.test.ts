// The gateway tunnel against a real sshd on loopback: the provider opens a local port that reaches a port on
// the host's loopback, the runner brings it up again after it went down (on the same port, which the URL
// names), and deleting it closes the port. The "host" here is this machine, so its loopback is ours.
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayTunnel } from "../../src/providers/tunnel";
import { openGatewayAccess } from "../../src/runner/stack/outputs";
import { startSshd, type TestSshd } from "../helpers/sshd";

let sshd: TestSshd;
let gateway: http.Server;
let remotePort = 0;

beforeAll(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-tunnel-test-"));
  sshd = await startSshd({ dockerSocket: path.join(dir, "none.sock") });
  gateway = http.createServer((_req, res) => res.end("gateway here"));
  await new Promise<void>((r) => gateway.listen(0, "127.0.0.1", r));
  remotePort = (gateway.address() as AddressInfo).port;
});
afterAll(async () => {
  await sshd?.stop();
  gateway?.close();
});

const get = async (port: number) => (await fetch(`http://127.0.0.1:${port}/`)).text();

describe("gatewayTunnel", () => {
  it("reaches the host's loopback port from a local one, comes back after it went down, and closes on delete", async () => {
    const ssh = {
      host: sshd.host,
      port: sshd.port,
      user: sshd.user,
      hostKey: sshd.hostKey,
      identityFile: sshd.identityFile,
    };
    const created = await gatewayTunnel.create({ ssh, remotePort });
    const localPort = created.outs.localPort as number;
    expect(localPort).not.toBe(remotePort);
    expect(await get(localPort)).toBe("gateway here");

    // Down (as after a reboot of the runner): the runner's read of the outputs brings it up on the same port.
    await gatewayTunnel.delete!(created.id, created.outs);
    await expect(get(localPort)).rejects.toThrow();
    const access = await openGatewayAccess(
      {
        gatewayUrl: { value: `http://127.0.0.1:${localPort}`, secret: false },
        controlToken: { value: "t", secret: true },
        gatewayTunnel: { value: { ssh, localPort, remotePort }, secret: false },
      },
      "tunnel-test",
    );
    expect(access.gatewayUrl).toBe(`http://127.0.0.1:${localPort}`);
    expect(await get(localPort)).toBe("gateway here");
    // And so does the check of the next up.
    await gatewayTunnel.delete!(created.id, created.outs);
    await gatewayTunnel.check!(created.outs, { ssh, remotePort });
    expect(await get(localPort)).toBe("gateway here");

    await gatewayTunnel.delete!(created.id, created.outs);
    await expect(get(localPort)).rejects.toThrow();
  }, 60_000);

  it("refuses a host with another key, naming the tunnel", async () => {
    const ssh = {
      host: sshd.host,
      port: sshd.port,
      user: sshd.user,
      hostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKq1Kz0d7ExampleKeyForDocsOnly0000000000000000",
      identityFile: sshd.identityFile,
    };
    await expect(gatewayTunnel.create({ ssh, remotePort })).rejects.toThrow(
      /gateway tunnel to .*: the tunnel to multienv-\w+ \(127\.0\.0\.1:\d+ -> \d+\) did not start: Host key verification failed/,
    );
  }, 60_000);
});
