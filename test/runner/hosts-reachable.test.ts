// Which hosts a destroy must reach over SSH, read from the state in the shape the components write it (each Docker
// resource names its engine's docker provider, a child of the DockerEngine whose outputs hold a remote host's SSH
// endpoint), and the check itself against a real sshd on loopback and a port where nothing listens.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { engineConnection, type SshEndpoint } from "../../src/plan/targets/ssh";
import {
  describeHost,
  hostsToReach,
  sshAnswers,
  unreachableHosts,
  unreachableMessage,
  type StateResource,
} from "../../src/runner/targets/hosts/hosts-reachable";
import { freePort } from "../helpers/ports";
import { startSshd, type TestSshd } from "../helpers/sshd";

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";
const envSsh = { host: "10.0.0.5", user: "ops", hostKey: KEY };
const pcSsh = { host: "10.0.0.6", user: "ops", hostKey: KEY, port: 2222 };
const urn = (type: string, name: string) => `urn:pulumi:s::multienv::${type}::${name}`;
const ENGINE = "multienv:docker:DockerEngine";
const PROVIDER = "pulumi:providers:docker";
const NETWORK = "docker:index/network:Network";
const CONTAINER = "docker:index/container:Container";
const IMAGE = "docker:index/remoteImage:RemoteImage";
const SSH_DIR = "/tmp/multienv-ssh-1000";

/** A DockerEngine as the state keeps it: a remote one's outputs hold its host's SSH endpoint. */
function engine(name: string, ssh?: SshEndpoint, parent?: string): StateResource {
  return { urn: urn(ENGINE, name), type: ENGINE, ...(parent ? { parent } : {}), outputs: ssh ? { ssh } : {} };
}

/** A DockerEngine's docker provider as the state keeps it: its host, and its sshOpts as the SDK's JSON text. */
function provider(engine: string, ssh?: SshEndpoint): StateResource {
  const connection = ssh === undefined ? undefined : engineConnection(ssh, SSH_DIR);
  return {
    urn: urn(PROVIDER, `${engine}-provider`),
    id: `${engine}-provider-id`,
    type: PROVIDER,
    parent: urn(ENGINE, engine),
    inputs: connection ? { host: connection.host, sshOpts: JSON.stringify(connection.sshOpts) } : {},
  };
}
const on = (engine: string) => `${urn(PROVIDER, `${engine}-provider`)}::${engine}-provider-id`;

function state(deletedWith?: string): StateResource[] {
  return [
    engine("s-env-engine", envSsh),
    engine("s-desktop-engine", pcSsh),
    engine("s-images"),
    provider("s-env-engine", envSsh),
    provider("s-desktop-engine", pcSsh),
    provider("s-images"),
    {
      urn: urn(NETWORK, "s-env"),
      type: NETWORK,
      parent: urn(ENGINE, "s-env-engine"),
      provider: on("s-env-engine"),
      inputs: { name: "s-env" },
      deletedWith,
    },
    {
      urn: urn(CONTAINER, "s-gateway"),
      type: CONTAINER,
      parent: urn("multienv:index:Gateway", "s-gateway"),
      provider: on("s-env-engine"),
      inputs: { name: "s-gateway" },
      deletedWith,
    },
    {
      urn: urn(CONTAINER, "s-desktop-proxy"),
      type: CONTAINER,
      parent: urn("multienv:index:Computer", "s-desktop"),
      provider: on("s-desktop-engine"),
      inputs: { name: "s-desktop-proxy" },
      deletedWith,
    },
    {
      urn: urn(NETWORK, "s-desktop-net"),
      type: NETWORK,
      parent: urn(ENGINE, "s-desktop-engine"),
      provider: on("s-desktop-engine"),
      inputs: { name: "s-desktop-net" },
      deletedWith,
    },
    // The runner's own engine (images built there) needs no SSH.
    {
      urn: urn(IMAGE, "s-images-gateway-image"),
      type: IMAGE,
      parent: urn(ENGINE, "s-images"),
      provider: on("s-images"),
      inputs: { name: "multienv/gateway:latest" },
    },
  ];
}

describe("the hosts a destroy must reach", () => {
  it("are those holding resources not deleted with a machine, each named by its engine's role", () => {
    const hosts = hostsToReach("s", state());
    expect(hosts.map((h) => [h.role, h.ssh.host, h.resources])).toEqual([
      ["env", "10.0.0.5", 2],
      ["desktop", "10.0.0.6", 2],
    ]);
    // Each host as the config gave it, so the check reaches it with its own pinned key, user and port.
    expect(hosts.map((h) => h.ssh)).toEqual([envSsh, pcSsh]);
    expect(hosts.map(describeHost)).toEqual([
      "the env host (ops@10.0.0.5)",
      "computer desktop's host (ops@10.0.0.6:2222)",
    ]);
  });

  it("name the role after the RemoteEngines an engine is a child of, when its name starts with that one's", () => {
    const remote = urn("multienv:remote:RemoteEngines", "s-hosts-remote");
    const hosts = hostsToReach("s", [
      engine("s-hosts-remote-open-engine", pcSsh, remote),
      provider("s-hosts-remote-open-engine", pcSsh),
      {
        urn: urn(NETWORK, "s-open-net"),
        type: NETWORK,
        parent: urn(ENGINE, "s-hosts-remote-open-engine"),
        provider: on("s-hosts-remote-open-engine"),
        inputs: { name: "s-open-net" },
      },
    ]);
    expect(hosts.map((h) => h.role)).toEqual(["open"]);
  });

  it("are none when everything on them goes with the machine (ec2), or on the local engine (docker)", () => {
    expect(hostsToReach("s", state(urn("aws:ec2/instance:Instance", "s-env")))).toEqual([]);
    expect(
      hostsToReach("s", [
        engine("s-engine"),
        provider("s-engine"),
        { urn: urn(CONTAINER, "s-gateway"), type: CONTAINER, provider: on("s-engine"), inputs: { name: "s-gateway" } },
      ]),
    ).toEqual([]);
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

  it("answers on a host whose sshd runs, with its pinned key, as read from a state", async () => {
    const ssh = {
      host: sshd.host,
      port: sshd.port,
      user: sshd.user,
      hostKey: sshd.hostKey,
      identityFile: sshd.identityFile,
    };
    const hosts = hostsToReach("s", [
      engine("s-env-engine", ssh),
      provider("s-env-engine", ssh),
      {
        urn: urn(CONTAINER, "s-gateway"),
        type: CONTAINER,
        provider: on("s-env-engine"),
        inputs: { name: "s-gateway" },
      },
    ]);
    expect(hosts.map((h) => h.ssh)).toEqual([ssh]);
    expect(await sshAnswers(hosts[0].ssh)).toBeUndefined();
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
