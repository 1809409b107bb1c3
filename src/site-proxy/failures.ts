// Why the proxy answers a request itself, classified once: what the computer is told (status, verdict, message) and
// the log line that says why. A refused address is a 403; a host that does not resolve or answer, or any other error
// on the way, a 502; a request the proxy cannot read, a 400.
import { SiteProxyVerdict } from "../protocol/site-proxy";
import { AddressRefused, addressOf, ConnectFailure } from "./connect";
import type { Exchange, Failure } from "./exchange";
import { formatAuthority } from "./messages";

/** What the computer is told when its request could not be sent on, and the log line that says why. */
export function failureOf(err: Error, x: Pick<Exchange, "method" | "host" | "port">): Failure {
  const authority = formatAuthority(x.host, x.port, -1);
  const { method, host, port } = x;
  if (err instanceof AddressRefused) {
    return {
      status: 403,
      verdict: SiteProxyVerdict.refused,
      message: `${authority} is refused: ${err.address} is ${err.why}`,
      line: { event: "refused", method, host, port, address: err.address, why: err.why },
    };
  }
  if (err instanceof ConnectFailure) {
    return {
      status: 502,
      verdict: SiteProxyVerdict.failed,
      message: `${authority} ${err.reason === "no answer" ? "does not answer" : "does not resolve"}: ${err.message}`,
      line: { event: "failed", method, host, port, reason: err.reason, error: err.message },
    };
  }
  return {
    status: 502,
    verdict: SiteProxyVerdict.failed,
    message: `${authority}: ${err.message}`,
    line: { event: "error", error: err.message, method, host, port, status: 502 },
  };
}

/** A host the computer's site table and reaching refuse (routing.ts says why). */
export function refusedByRoute(x: Pick<Exchange, "method" | "host" | "port">, why: string): Failure {
  const address = addressOf(x.host);
  return {
    status: 403,
    verdict: SiteProxyVerdict.refused,
    message: `${formatAuthority(x.host, x.port, -1)} is refused: ${why}`,
    line: {
      event: "refused",
      method: x.method,
      host: x.host,
      port: x.port,
      ...(address !== undefined ? { address } : {}),
      why,
    },
  };
}

/** A request the proxy does not send on, as it cannot read it as one (`client`: the computer's address). */
export function badRequest(client: string | undefined, message: string, method?: string): Failure {
  return {
    status: 400,
    verdict: SiteProxyVerdict.badRequest,
    message,
    line: { event: "error", error: message, client, ...(method ? { method } : {}), status: 400 },
  };
}
