// `gatewayTunnel`: the runner's way to a gateway on a remote host. The gateway publishes its runner listener on the
// host's loopback alone, and the runner reaches it through an SSH tunnel from a local port (src/plan/targets/ssh.ts):
// encrypted, authenticated by the pinned host key, and no port of the gateway's open to any network. Created with a
// free local port, kept in the state; every check (each preview and up) brings it up again when it is down, and so does
// the runner before it uses the gateway (src/runner/stack/outputs.ts). Deleted: the tunnel ends. A dynamic resource
// because no package keeps a local process (the tunnel) alive across previews and ups.
import { execFile } from "node:child_process";
import net from "node:net";
import { gatewayTunnelUp, sshSetup, tunnelDownLines, type GatewayTunnel } from "../plan/targets/ssh";
import { diffInputs, hasUnknown, pick, type Operations } from "./operation";

const INPUT_KEYS = ["ssh", "remotePort"] as const;

function sh(script: string): Promise<void> {
  return new Promise((resolve, reject) =>
    execFile("/bin/sh", ["-c", script], { timeout: 60_000 }, (error, _out, stderr) =>
      error ? reject(new Error((stderr || error.message).trim())) : resolve(),
    ),
  );
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
    server.on("error", reject);
  });
}

/** Brings the tunnel up (when it is not) and returns it. */
export async function ensureTunnel(tunnel: GatewayTunnel): Promise<GatewayTunnel> {
  await sh(gatewayTunnelUp(tunnel)).catch((e: Error) => {
    throw new Error(`gateway tunnel to ${tunnel.ssh.user}@${tunnel.ssh.host}: ${e.message}`);
  });
  return tunnel;
}

export const gatewayTunnel: Operations = {
  async check(olds, news) {
    // An up after the tunnel died (a reboot, another shell) must find it again, on the port the URL names.
    if (
      !hasUnknown(news) &&
      typeof olds.localPort === "number" &&
      JSON.stringify(olds.ssh) === JSON.stringify(news.ssh)
    ) {
      await ensureTunnel({ ssh: news.ssh, localPort: olds.localPort, remotePort: news.remotePort }).catch(
        () => undefined,
      );
    }
    return { inputs: news };
  },
  async diff(_id, olds, news) {
    return diffInputs(olds, news, INPUT_KEYS, { replaceOn: "all" });
  },
  async create(inputs) {
    const localPort = await freePort();
    await ensureTunnel({ ssh: inputs.ssh, localPort, remotePort: inputs.remotePort });
    return { id: `tunnel-${localPort}`, outs: { ...pick(inputs, INPUT_KEYS), localPort } };
  },
  async delete(_id, props) {
    await sh(`${sshSetup(props.ssh).split("\n").slice(0, -1).join("\n")}\n${tunnelDownLines(props.localPort)}`).catch(
      () => undefined,
    );
  },
};
