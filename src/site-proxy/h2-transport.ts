// HTTP/2 conversations inside tunnels the proxy terminates (ALPN h2). One server makes the sessions (it never
// listens); each session is bound to its tunnel as it is made, so a stream is only ever routed by its own tunnel's
// name. Each stream is one exchange, routed once and sent on (h2.ts), a WebSocket's by websocket-transport.ts.
import * as http2 from "node:http2";
import type * as tls from "node:tls";
import { endingHooks, failed, type ProxyContext } from "./context";
import { answerStream, forwardStream, H2_SERVER_OPTIONS, type H2Request, readH2Request } from "./h2";
import type { SyntheticTunnel } from "./request-route";
import { h2WebSocket } from "./websocket-transport";

const COMPUTER_ENDED = "computer's side ended";

export class H2Conversations {
  private readonly server = http2.createServer(H2_SERVER_OPTIONS);
  /** The conversation being handed to the server, whose session is made as it is. */
  private arriving: { tunnel: SyntheticTunnel; conversation: tls.TLSSocket } | undefined;

  constructor(private readonly ctx: ProxyContext) {
    this.server.on("session", (session: http2.ServerHttp2Session) => {
      const bound = this.arriving;
      if (!bound) return void session.destroy();
      this.serveSession(session, bound.tunnel, bound.conversation);
    });
  }

  /** Serves the HTTP/2 conversation `conversation` of `tunnel` (its TLS done, h2 chosen). */
  serve(conversation: tls.TLSSocket, tunnel: SyntheticTunnel): void {
    this.ctx.connections.track(conversation);
    conversation.setTimeout(0);
    // A TLS server marks its sockets connected once secure (node's tls.Server does it as it emits
    // secureConnection); a session waits for a socket still marked connecting, so this one is marked by hand.
    (conversation as tls.TLSSocket & { secureConnecting: boolean }).secureConnecting = false;
    this.arriving = { tunnel, conversation };
    try {
      this.server.emit("connection", conversation);
    } finally {
      this.arriving = undefined;
    }
  }

  private serveSession(session: http2.ServerHttp2Session, tunnel: SyntheticTunnel, conversation: tls.TLSSocket): void {
    const { idleTimeoutMs, headTimeoutMs, log } = this.ctx;
    session.on("error", () => session.destroy());
    // The session's own timer: with HTTP/2 reading the socket itself, the socket's timer would not see traffic.
    session.setTimeout(idleTimeoutMs, () => session.destroy());
    // The computer is done sending (its side of the connection ended): the streams under way finish, then it closes.
    // The proxy's sockets are half-open ones, so nothing else would close it. A WebSocket's stream never finishes
    // then: it ends with a close the computer can no longer send, so the session, and the tunnel's connection line,
    // would wait for the idle timeout. Those streams are cut instead.
    const webSockets = new Set<http2.ServerHttp2Stream>();
    conversation.once("end", () => {
      session.close();
      // An error, so the relay ends the destination's side too (its line says why).
      for (const stream of webSockets)
        stream.destroy(Object.assign(new Error(COMPUTER_ENDED), { code: COMPUTER_ENDED }));
    });
    const client = conversation.remoteAddress;
    // As for an HTTP/1.1 connection, the first request must come within the head timeout.
    const firstRequest = setTimeout(() => {
      log.write({
        event: "error",
        error: `no complete request head within ${headTimeoutMs} ms; connection dropped`,
        client,
        host: tunnel.host,
        port: tunnel.port,
      });
      session.destroy();
    }, headTimeoutMs);
    session.once("stream", () => clearTimeout(firstRequest));
    session.once("close", () => clearTimeout(firstRequest));
    session.on(
      "stream",
      (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, flags: number, rawHeaders: string[]) => {
        const request = readH2Request(headers, rawHeaders, flags);
        if (request.protocol === "websocket") {
          webSockets.add(stream);
          stream.once("close", () => webSockets.delete(stream));
        }
        this.onStream(stream, request, tunnel, client);
      },
    );
  }

  /** One HTTP/2 stream inside a tunnel: its own name's site or recorded host, or refused. */
  private onStream(
    stream: http2.ServerHttp2Stream,
    r: H2Request,
    tunnel: SyntheticTunnel,
    client: string | undefined,
  ): void {
    const { exchanges, routes, upstreams } = this.ctx;
    stream.on("error", () => stream.destroy());
    const route = routes.forStream(r, tunnel, stream.session?.socket ?? stream, client);
    if (route.to === "answer") {
      exchanges.declined(route.failure);
      return answerStream(stream, route.failure.status, route.failure.verdict, route.failure.message);
    }
    const x = exchanges.begin(route.x, route.asked);
    if (r.protocol === "websocket") return h2WebSocket(this.ctx, stream, route, x);
    const hooks = {
      ...endingHooks(exchanges, x),
      failed: (err: Error, settled: boolean) => {
        if (settled) return void stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
        const f = failed(exchanges, x, err);
        answerStream(stream, f.status, f.verdict, f.message);
      },
    };
    const slots = route.to === "gateway" ? upstreams.gatewaySlots : undefined;
    forwardStream(stream, r, upstreams.agent(route.to), route.destination, hooks, slots);
  }
}
