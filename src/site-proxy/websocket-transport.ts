// WebSockets (and other upgrades): an HTTP/1.1 upgrade, outside a tunnel or inside one, and an HTTP/2 extended
// CONNECT on a tunnel's stream, each routed once and sent on a fresh connection to its upstream (an upgraded
// connection is never pooled), its frames relayed as they are once the upstream switched protocols.
import type * as http from "node:http";
import type * as http2 from "node:http2";
import type * as net from "node:net";
import { endingHooks, failed, type ProxyContext } from "./context";
import type { Exchange, Failure } from "./exchange";
import { badRequest } from "./failures";
import { forwardUpgrade, type UpgradeHooks } from "./forward";
import { upgradeFramingProblem } from "./framing";
import { answerStream, forwardWebSocket } from "./h2";
import { answerSocket } from "./messages";
import type { RequestRoute } from "./request-route";

type Routed = Exclude<RequestRoute, { to: "answer" }>;

/** The upgrade's hooks: the observers hear how it ended, and the proxy's own answer goes on `answer`. */
function upgradeHooks(ctx: ProxyContext, route: Routed, x: Exchange, answer: (f: Failure) => void): UpgradeHooks {
  const { host, port } = route.destination;
  return {
    open: () => ctx.upstreams.open(route.to, host, port),
    ...endingHooks(ctx.exchanges, x),
    failed: (err) => {
      answer(failed(ctx.exchanges, x, err));
    },
  };
}

/** The proxy's handler of HTTP/1.1 upgrades (node's server's `upgrade` event). */
export function http1Upgrades(
  ctx: ProxyContext,
): (req: http.IncomingMessage, client: net.Socket, early: Buffer) => void {
  const { conversations, exchanges, routes } = ctx;
  return (req, client, early) => {
    client.on("error", () => client.destroy());
    if (conversations.isCondemned(client)) return void client.destroy();
    const problem = upgradeFramingProblem(req);
    if (problem) {
      const f = badRequest(client.remoteAddress, `malformed request: ${problem}`, req.method);
      exchanges.declined(f);
      return answerSocket(client, f.status, f.verdict, f.message);
    }
    const route = routes.forRequest(req, client, conversations.tunnelOf(client), "");
    if (route.to === "answer") {
      exchanges.declined(route.failure);
      return answerSocket(client, route.failure.status, route.failure.verdict, route.failure.message);
    }
    const x = exchanges.begin(route.x, route.asked);
    const answer = (f: Failure) => answerSocket(client, f.status, f.verdict, f.message);
    forwardUpgrade(req, client, early, route.destination, ctx.idleTimeoutMs, upgradeHooks(ctx, route, x, answer));
  };
}

/** A WebSocket on an HTTP/2 stream (RFC 8441), already routed and begun as the exchange `x`. */
export function h2WebSocket(ctx: ProxyContext, stream: http2.ServerHttp2Stream, route: Routed, x: Exchange): void {
  const answer = (f: Failure) => answerStream(stream, f.status, f.verdict, f.message);
  forwardWebSocket(stream, route.destination, ctx.idleTimeoutMs, upgradeHooks(ctx, route, x, answer));
}
