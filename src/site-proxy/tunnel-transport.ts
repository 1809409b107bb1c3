// CONNECT. To a host the computer reaches: a byte tunnel, never decrypted. To a synthetic name, or a live host the
// proxy records: answered 200, then the conversation inside is served here; one that starts with a TLS handshake
// (https, wss) is answered as that name with a leaf from the env CA (HTTP/2 when the computer offers it), one that
// starts in the clear (Chromium tunnels ws:// through CONNECT too) is read as plain HTTP.
import type * as http from "node:http";
import type * as net from "node:net";
import * as tls from "node:tls";
import { SiteProxyVerdict } from "../protocol/site-proxy";
import type { Opened } from "./connect";
import type { ProxyContext } from "./context";
import type { Failure } from "./exchange";
import { badRequest, failureOf } from "./failures";
import { answerSocket, formatAuthority, parseAuthority } from "./messages";
import { relay } from "./relay";
import type { SyntheticTunnel } from "./request-route";

/** Where a terminated tunnel's conversation is served: HTTP/1.1 by the proxy's own server, or HTTP/2. */
export interface ConversationServers {
  http1(conversation: net.Socket): void;
  h2(conversation: tls.TLSSocket, tunnel: SyntheticTunnel): void;
}

/** Where a terminated tunnel's `connection` line counts from: the moment before its 200, and its bytes then. */
interface Counted {
  start: Date;
  readBefore: number;
  writtenBefore: number;
}

/** The proxy's handler of CONNECT (node's server's `connect` event). */
export function connects(
  ctx: ProxyContext,
  servers: ConversationServers,
): (req: http.IncomingMessage, client: net.Socket, head: Buffer) => void {
  const { conversations, exchanges, routes } = ctx;
  return (req, client, head) => {
    client.setNoDelay(true);
    client.on("error", () => client.destroy());
    if (conversations.isCondemned(client)) return void client.destroy();
    const decline = (f: Failure) => {
      exchanges.declined(f);
      answerSocket(client, f.status, f.verdict, f.message);
    };
    if (conversations.tunnelOf(client))
      return decline(badRequest(client.remoteAddress, "CONNECT inside a tunnel", "CONNECT"));
    const target = parseAuthority(req.url ?? "");
    if (!target)
      return decline(badRequest(client.remoteAddress, `CONNECT needs host:port, got "${req.url}"`, "CONNECT"));
    const route = routes.forConnect(target);
    if (route.to === "terminate") void terminate(ctx, servers, client, head, { site: route.site, ...target });
    else if (route.to === "answer") decline(route.failure);
    else void tunnel(ctx, client, head, target);
  };
}

/** CONNECT to a host the computer reaches: a byte tunnel, never decrypted. */
async function tunnel(
  ctx: ProxyContext,
  client: net.Socket,
  head: Buffer,
  target: { host: string; port: number },
): Promise<void> {
  const { host, port } = target;
  let upstream: Opened;
  try {
    upstream = await ctx.upstreams.openLogged("CONNECT", host, port);
  } catch (err) {
    const f = failureOf(err as Error, { method: "CONNECT", host, port });
    ctx.exchanges.declined(f);
    answerSocket(client, f.status, f.verdict, f.message);
    return;
  }
  if (client.destroyed) {
    upstream.socket.destroy();
    return;
  }
  client.write("HTTP/1.1 200 Connection established\r\n\r\n");
  if (head.length > 0) upstream.socket.write(head);
  relay(client, upstream.socket, ctx.idleTimeoutMs, upstream.bulk);
}

/**
 * CONNECT to a synthetic name or a recorded live host: answer 200, then serve the conversation inside the tunnel,
 * its name deciding where each of its requests goes.
 */
async function terminate(
  ctx: ProxyContext,
  servers: ConversationServers,
  client: net.Socket,
  head: Buffer,
  target: Omit<SyntheticTunnel, "proto">,
): Promise<void> {
  const { log, idleTimeoutMs } = ctx;
  const { host, port } = target;
  let context: tls.SecureContext;
  try {
    context = await ctx.ca.contextFor(host);
  } catch (err) {
    log.write({
      event: "error",
      error: `issuing a certificate for ${host}: ${(err as Error).message}`,
      method: "CONNECT",
      host,
      port,
      status: 502,
    });
    answerSocket(client, 502, SiteProxyVerdict.failed, `cannot issue a certificate for ${host}`);
    return;
  }
  if (client.destroyed) return;
  const counted: Counted = { start: new Date(), readBefore: client.bytesRead, writtenBefore: client.bytesWritten };
  client.write("HTTP/1.1 200 Connection established\r\n\r\n");
  // A computer that opens the tunnel and says nothing is let go after the idle timeout too.
  const silent = () => client.destroy();
  client.setTimeout(idleTimeoutMs);
  client.once("timeout", silent);
  const serve = (first: Buffer) => {
    client.setTimeout(0); // from here the conversation's own timer counts (TLS reads bypass the raw socket's)
    client.off("timeout", silent);
    serveConversation(ctx, servers, client, first, context, target, counted);
  };
  if (head.length > 0) serve(head);
  else client.once("data", serve);
}

/** The conversation inside a terminated tunnel, from its `first` bytes: TLS (answered as the name) or plain HTTP. */
function serveConversation(
  ctx: ProxyContext,
  servers: ConversationServers,
  client: net.Socket,
  first: Buffer,
  context: tls.SecureContext,
  target: Omit<SyntheticTunnel, "proto">,
  counted: Counted,
): void {
  const { log, idleTimeoutMs, headTimeoutMs, routes } = ctx;
  const { site, host, port } = target;
  const { start, readBefore, writtenBefore } = counted;
  client.pause();
  client.unshift(first); // a TLSSocket takes over bytes already read; the HTTP parser gets them on resume
  const tlsHandshake = first[0] === 0x16;
  // HTTP/2 first: one connection for a whole page. The context is the name's own, cached with its leaf, so a
  // browser coming back resumes its TLS session with a ticket only that name's context can read.
  const conversation: net.Socket = tlsHandshake
    ? new tls.TLSSocket(client, { isServer: true, secureContext: context, ALPNProtocols: ["h2", "http/1.1"] })
    : client;
  const tunnel: SyntheticTunnel = { site, host, port, proto: tlsHandshake ? "https" : "http" };
  ctx.conversations.inTunnel(conversation, tunnel);
  conversation.setTimeout(idleTimeoutMs);
  conversation.on("timeout", () => conversation.destroy());
  conversation.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code !== "ECONNRESET" && err.code !== "EPIPE") {
      log.write({
        event: "error",
        error: `${tlsHandshake ? "TLS" : "HTTP"} with the computer for ${host}: ${err.message}`,
        client: client.remoteAddress,
        method: "CONNECT",
        host,
        port,
      });
    }
    conversation.destroy();
  });
  conversation.once("close", () => {
    client.destroy();
    const protocol = tlsHandshake ? (conversation as tls.TLSSocket).alpnProtocol || "http/1.1" : undefined;
    log.write({
      event: "connection",
      method: "CONNECT",
      host,
      port,
      // A recorded live host's line names the host: its requests went there on connections of their own.
      address: site === undefined ? formatAuthority(host, port) : `${routes.gatewayHost}:${routes.gatewayPort}`,
      ...(site !== undefined ? { site } : { recorded: true as const }),
      ...(protocol === "h2" || protocol === "http/1.1" ? { protocol } : {}),
      bytesToHost: client.bytesRead - readBefore,
      bytesFromHost: client.bytesWritten - writtenBefore,
      start: start.toISOString(),
      durationMs: Date.now() - start.getTime(),
    });
  });
  if (!tlsHandshake) {
    // This server parses the conversation like any connection of its own, head timeout included.
    servers.http1(conversation);
    client.resume();
    return;
  }
  // The handshake counts against the head timeout, as the head it comes before does.
  const handshake = setTimeout(() => {
    log.write({
      event: "error",
      error: `no TLS handshake within ${headTimeoutMs} ms; connection dropped`,
      client: client.remoteAddress,
      host,
      port,
    });
    conversation.destroy();
  }, headTimeoutMs);
  conversation.once("close", () => clearTimeout(handshake));
  conversation.once("secure", () => {
    clearTimeout(handshake);
    if ((conversation as tls.TLSSocket).alpnProtocol === "h2") servers.h2(conversation as tls.TLSSocket, tunnel);
    else servers.http1(conversation);
  });
}
