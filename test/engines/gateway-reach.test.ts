// The one way to reach a gateway: straight at its URL, or through a remote host's SSH tunnel brought up again (a
// real ssh client against a port where no sshd answers, so the tunnel cannot come up). A way that does not open is
// one line naming who asked, or, for a best-effort caller, told to it while the output's URL is kept.
import { describe, expect, it } from "vitest";
import { openGatewayReach } from "../../src/engines/gateway-reach";
import { freePort } from "../helpers/ports";

const HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";

async function deadTunnel() {
  const [localPort, sshPort] = [await freePort(), await freePort()];
  return {
    gatewayUrl: `http://127.0.0.1:${localPort}`,
    gatewayTunnel: {
      ssh: { host: "127.0.0.1", port: sshPort, user: "multienv", hostKey: HOST_KEY },
      localPort,
      remotePort: 8080,
    },
  };
}

describe("reaching a gateway", () => {
  it("dials a local gateway's URL as it is", async () => {
    const reach = await openGatewayReach({ gatewayUrl: "http://127.0.0.1:8080" }, { owner: "stack task-1" });
    expect(reach).toEqual({ url: "http://127.0.0.1:8080", close: expect.any(Function) });
    await reach.close();
  });

  it("fails in one line naming who asked and the host when the SSH tunnel does not come up", async () => {
    const route = await deadTunnel();
    const error = (await openGatewayReach(route, { owner: "stack task-1" }).catch((e: unknown) => e)) as Error;
    expect(error.message).toMatch(
      /^stack task-1: the SSH tunnel to the gateway \(multienv@127\.0\.0\.1\) did not come up: /,
    );
    expect(error.message).not.toContain("\n");
  });

  it("tells a best-effort caller why, and keeps the output's URL, when the tunnel does not come up", async () => {
    const route = await deadTunnel();
    const told: Error[] = [];
    const reach = await openGatewayReach(route, { owner: "stack task-1", onUnreachable: (e) => told.push(e) });
    expect(told).toHaveLength(1);
    expect(reach.url).toBe(route.gatewayUrl);
    expect(reach.unreachable).toBe(told[0].message);
    expect(reach.unreachable).toMatch(/^stack task-1: the SSH tunnel to the gateway/);
  });
});
