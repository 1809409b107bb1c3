// The runner's way to a gateway on a Kubernetes cluster (src/protocol/port-forward.ts): a listener on 127.0.0.1 at a
// free port, each connection to it carried to the gateway pod's port through the API server (client-node's
// PortForward, the same WebSocket stream kubectl port-forward uses). The gateway's runner listener is bound to the
// pod's loopback, which only a port-forward reaches.
//
// Nothing here keeps a process alive: the listener and the sockets it holds are unref'd, so a CLI command exits when
// its work is done, while a client's own socket (a fetch under way, a DevTools WebSocket) keeps it alive as long as
// that client needs it. A library caller that wants it gone sooner calls close().
import net from "node:net";
import { Writable } from "node:stream";
import type { GatewayPortForward } from "../protocol/port-forward";
import { RunnerError } from "../errors";
import { apiErrorText, clientNode, coreApi, isNotFound, loadKubeConfig, type LoadedKubeConfig } from "./kubernetes";

/** A port-forward while it is open. */
export interface OpenPortForward {
  /** `http://127.0.0.1:<port>`: the pod's port, as long as the forward is open. */
  url: string;
  port: number;
  /** Stops listening and ends the connections under way. */
  close(): Promise<void>;
}

export interface PortForwardOptions {
  /** The environment KUBECONFIG is read from (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** A connection the API server could not carry to the pod, in a line (default: nothing is said). */
  log?: (line: string) => void;
}

/** Fails, naming the pod, when it is not there or not running: a forward to it would fail every connection. */
async function checkPod(loaded: LoadedKubeConfig, namespace: string, pod: string): Promise<void> {
  const fix = `\`multienv status ${namespace}\` shows the env's pods`;
  let phase: string | undefined;
  try {
    phase = (await coreApi(loaded).readNamespacedPod({ name: pod, namespace })).status?.phase;
  } catch (error) {
    if (isNotFound(error))
      throw new RunnerError(
        `pod ${pod} is not in namespace ${namespace} (context ${loaded.context}): the gateway is gone; ${fix}, \`multienv up ${namespace}\` deploys it again`,
        { cause: error },
      );
    throw new RunnerError(
      `the cluster (context ${loaded.context}) did not answer for pod ${pod} in namespace ${namespace}: ${apiErrorText(error)}`,
      { cause: error },
    );
  }
  if (phase !== "Running")
    throw new RunnerError(
      `pod ${pod} in namespace ${namespace} (context ${loaded.context}) is ${phase ?? "in no phase"}, not running; ${fix}`,
    );
}

/** Unrefs a WebSocket's own socket (ws keeps it as `_socket`), so an idle forwarded connection holds no process. */
function unrefSocketOf(ws: unknown): void {
  (ws as { _socket?: net.Socket } | undefined)?._socket?.unref();
}

/**
 * Forwards 127.0.0.1:<free port> to `port` of the pod, after checking the pod runs. Each local connection gets a
 * stream of its own through the API server; one the pod refuses is closed (and named through `log`).
 */
export async function openPortForward(
  loaded: LoadedKubeConfig,
  target: { namespace: string; pod: string; port: number },
  options: PortForwardOptions = {},
): Promise<OpenPortForward> {
  const { namespace, pod, port } = target;
  await checkPod(loaded, namespace, pod);
  const forward = new (clientNode().PortForward)(loaded.config);
  const sockets = new Set<net.Socket>();
  const server = net.createServer({ pauseOnConnect: true }, (socket) => {
    sockets.add(socket);
    socket.unref();
    socket.on("error", () => undefined);
    // The pod's error stream: the port refused or the pod went away. kubectl closes the connection then; so does this.
    const errors = new Writable({
      write(chunk: Buffer, _encoding, done) {
        // The stream's first frame carries only the port, which leaves nothing here.
        const text = chunk.toString("utf8").trim();
        if (text !== "") {
          options.log?.(`port-forward to pod ${pod} port ${port}: ${text}`);
          socket.destroy();
        }
        done();
      },
    });
    forward
      .portForward(namespace, pod, [port], socket, errors, socket)
      .then((opened) => {
        const ws = opened as import("ws").WebSocket;
        unrefSocketOf(ws);
        ws.on("close", () => socket.end());
        ws.on("error", () => socket.destroy());
        socket.on("close", () => ws.close());
        if (socket.destroyed) ws.close();
        socket.resume();
      })
      .catch((error: unknown) => {
        options.log?.(`port-forward to pod ${pod} port ${port}: ${apiErrorText(error)}`);
        socket.destroy();
      });
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((done, fail) => {
    server.once("error", fail);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", fail);
      done();
    });
  });
  server.unref();
  const local = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${local}`,
    port: local,
    close: () =>
      new Promise<void>((done) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => done());
      }),
  };
}

/** Opens the stack's `gatewayPortForward`: its kubeconfig and context as kubectl would read them. */
export async function openGatewayPortForward(
  forward: GatewayPortForward,
  options: PortForwardOptions = {},
): Promise<OpenPortForward> {
  const loaded = loadKubeConfig({ kubeconfig: forward.kubeconfig, context: forward.context }, options.env);
  return openPortForward(loaded, forward, options);
}
