// Which hosts a destroy must reach over SSH, read from the state, and the check itself against a real sshd on
// loopback and a port where nothing listens.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  describeHost,
  hostsToReach,
  sshAnswers,
  unreachableHosts,
  unreachableMessage,
  type StateResource,
} from "../../src/runner/hosts-reachable";
import { freePort, startSshd, type TestSshd } from "../helpers/sshd";

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
const envSsh = { host: "10.0.0.5", user: "ops", hostKey: KEY };
const pcSsh = { host: "10.0.0.6", user: "ops", hostKey: KEY, port: 2222 };
const urn = (type: string, name: string) => `urn:pulumi:s::multienv::${type}::${name}`;
const ENGINE = "multienv:docker:DockerEngine";
const NETWORK = "pulumi-nodejs:dynamic/docker:Network";
const CONTAINER = "pulumi-nodejs:dynamic/docker:Container";

function state(deletedWith?: string): StateResource[] {
  return [
    { urn: urn(ENGINE, "s-env-engine"), type: ENGINE },
    { urn: urn(ENGINE, "s-desktop-engine"), type: ENGINE },
    { urn: urn(ENGINE, "s-images"), type: ENGINE },
    {
      urn: urn(NETWORK, "s-env"),
      type: NETWORK,
      parent: urn(ENGINE, "s-env-engine"),
      inputs: { engine: { host: "ssh://ops@10.0.0.5", ssh: envSsh } },
      deletedWith,
    },
    {
      urn: urn(CONTAINER, "s-gateway"),
      type: CONTAINER,
      parent: urn("multienv:index:Gateway", "s-gateway"),
      inputs: { engine: { host: "ssh://ops@10.0.0.5", ssh: envSsh } },
      deletedWith,
    },
    {
      urn: urn(CONTAINER, "s-desktop-proxy"),
      type: CONTAINER,
      parent: urn("multienv:index:Computer", "s-desktop"),
      inputs: { engine: { host: "ssh://ops@10.0.0.6:2222", ssh: pcSsh } },
      deletedWith,
    },
    {
      urn: urn(NETWORK, "s-desktop-net"),
      type: NETWORK,
      parent: urn(ENGINE, "s-desktop-engine"),
      inputs: { engine: { host: "ssh://ops@10.0.0.6:2222", ssh: pcSsh } },
      deletedWith,
    },
    // The runner's own engine (images built there) needs no SSH.
    { urn: urn("pulumi-nodejs:dynamic/docker:Image", "s-images-gateway-image"), inputs: { engine: {} } },
  ];
}

describe("the hosts a destroy must reach", () => {
  it("are those holding resources not deleted with a machine, each named by its engine's role", () => {
    const hosts = hostsToReach("s", state());
    expect(hosts.map((h) => [h.role, h.ssh.host, h.resources])).toEqual([
      ["env", "10.0.0.5", 2],
      ["desktop", "10.0.0.6", 2],
    ]);
    expect(hosts.map(describeHost)).toEqual([
      "the env host (ops@10.0.0.5)",
      "computer desktop's host (ops@10.0.0.6:2222)",
    ]);
  });

  it("name the role after the RemoteEngines an engine is a child of, when its name starts with that one's", () => {
    const remote = urn("multienv:remote:RemoteEngines", "s-hosts-remote");
    const engine = urn(ENGINE, "s-hosts-remote-open-engine");
    const hosts = hostsToReach("s", [
      { urn: engine, type: ENGINE, parent: remote },
      {
        urn: urn(NETWORK, "s-open-net"),
        type: NETWORK,
        parent: engine,
        inputs: { engine: { host: "ssh://ops@10.0.0.6:2222", ssh: pcSsh } },
      },
    ]);
    expect(hosts.map((h) => h.role)).toEqual(["open"]);
  });

  it("are none when everything on them goes with the machine (ec2), or on the local engine (docker)", () => {
    expect(hostsToReach("s", state(urn("aws:ec2/instance:Instance", "s-env")))).toEqual([]);
    expect(hostsToReach("s", [{ urn: urn(CONTAINER, "s-gateway"), inputs: { engine: {} } }])).toEqual([]);
  });

  it("names each unreachable host with why in one line, and how to go on", async () => {
    const hosts = hostsToReach("s", state());
    const down = await unreachableHosts(hosts, async (ssh) =>
      ssh.host === "10.0.0.6" ? "Connection refused" : undefined,
    );
    const message = unreachableMessage("s", down);
    expect(message).toBe(
      "stack s: not destroyed, nothing collected or deleted: computer desktop's host (ops@10.0.0.6:2222) does not answer over SSH (Connection refused); what runs there is still in the state, so bring its SSH back and run `multienv down s` again (if the machine is gone for good, remove its containers yourself and then its resources with `pulumi state delete`)",
    );
    expect(message).not.toContain("\n");
  });
});

describe("the SSH check", () => {
  let sshd: TestSshd;
  beforeAll(async () => {
    sshd = await startSshd({ dockerSocket: "/nonexistent.sock" });
  });
  afterAll(async () => {
    await sshd?.stop();
  });

  it("answers on a host whose sshd runs, with its pinned key", async () => {
    const ssh = {
      host: sshd.host,
      port: sshd.port,
      user: sshd.user,
      hostKey: sshd.hostKey,
      identityFile: sshd.identityFile,
    };
    expect(await sshAnswers(ssh)).toBeUndefined();
  });

  it("says why, within its bound, where nothing listens", async () => {
    const port = await freePort();
    const started = Date.now();
    const why = await sshAnswers({
      host: "127.0.0.1",
      port,
      user: sshd.user,
      hostKey: sshd.hostKey,
      identityFile: sshd.identityFile,
    });
    expect(why).toMatch(/Connection refused/);
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});
