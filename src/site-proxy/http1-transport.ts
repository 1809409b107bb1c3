// HTTP/1.1 requests, absolute-form outside a tunnel or origin-form inside one: a request whose framing is broken is
// answered 400 and its connection never read again; the env CA's certificate is answered here; every other request
// is routed once and sent on to its upstream (forward.ts), the gateway's waiting for one of its slots.
import type * as http from "node:http";
import { SITE_PROXY_CA_PATH } from "../protocol/site-proxy";
import { endingHooks, failed, type ProxyContext } from "./context";
import type { Exchange } from "./exchange";
import { badRequest } from "./failures";
import { BrokenAnswer, forward, type ForwardHooks } from "./forward";
import { requestFramingProblem } from "./framing";
import { answerResponse } from "./messages";

/** The proxy's handler of HTTP/1.1 requests (node's server's `request` event). */
export function http1Requests(ctx: ProxyContext): (req: http.IncomingMessage, res: http.ServerResponse) => void {
  const { conversations, exchanges, routes, upstreams } = ctx;

  /**
   * The env CA's certificate, asked of the proxy itself (origin form, outside any tunnel): a browser in a pod of its
   * own fetches it to trust the proxy's leaves (kubernetes target). It is public; the key never leaves the proxy.
   */
  const asksForCa = (req: http.IncomingMessage): boolean =>
    conversations.tunnelOf(req.socket) === undefined &&
    req.url === SITE_PROXY_CA_PATH &&
    (req.method === "GET" || req.method === "HEAD");

  const answerCa = (res: http.ServerResponse): void => {
    const pem = ctx.ca.certPem;
    res.writeHead(200, { "Content-Type": "application/x-pem-file", "Content-Length": Buffer.byteLength(pem) });
    res.end(res.req.method === "HEAD" ? undefined : pem);
  };

  const hooks = (res: http.ServerResponse, x: Exchange): ForwardHooks => ({
    ...endingHooks(exchanges, x),
    failed: (err, settled) => {
      if (settled) return void res.destroy();
      const f = failed(exchanges, x, err);
      // A broken answer leaves nothing to trust about the exchange: the computer's connection ends too.
      answerResponse(res, f.status, f.verdict, f.message, err instanceof BrokenAnswer);
    },
  });

  return (req, res) => {
    if (conversations.isCondemned(req.socket)) return void res.destroy();
    const problem = requestFramingProblem(req);
    if (problem) {
      conversations.condemn(req.socket);
      const f = badRequest(req.socket.remoteAddress, `malformed request: ${problem}`, req.method);
      exchanges.declined(f);
      return answerResponse(res, f.status, f.verdict, f.message, true);
    }
    if (asksForCa(req)) return answerCa(res);
    const tunnel = conversations.tunnelOf(req.socket);
    const route = routes.forRequest(req, req.socket, tunnel, "; send an absolute http:// URL or CONNECT host:port");
    if (route.to === "answer") {
      exchanges.declined(route.failure);
      return answerResponse(res, route.failure.status, route.failure.verdict, route.failure.message);
    }
    const x = exchanges.begin(route.x, route.asked);
    const slots = route.to === "gateway" ? upstreams.gatewaySlots : undefined;
    forward(req, res, upstreams.agent(route.to), route.destination, hooks(res, x), slots);
  };
}
