// Who may use which route of the gateway. Two credentials open anything:
// - the control token (the runner's): every route of the published listener, `/healthz` being open to anyone;
// - a computer's agent token (an agent harness's): that one computer's DevTools, `/computers/<name>/cdp...`, on the
//   published listener, and nothing else on either listener.
// Either is presented as `Authorization: Bearer <token>` or in the gateway's own header (CONTROL_TOKEN_HEADER), which
// leaves Authorization to a site's own credential. An agent token anywhere but its own DevTools route is refused
// (401) even beside the control token, in any form a site could decode it back from: a computer cannot spend it on
// another computer, a site's data plane or a synthetic site's pages.
import type { IncomingMessage } from "node:http";
import {
  carriesControlToken,
  computerAgentToken,
  CONTROL_TOKEN_HEADER,
  secretTokens,
  tokensEqual,
  withoutTokens,
  type SecretTokens,
} from "../protocol/auth";
import type { Listener } from "./bind";
import type { Route } from "./routes";

export interface AccessRefusal {
  status: 401;
  body: { error: string; detail: string };
}

const CONTROL_TOKEN_REQUIRED: AccessRefusal = {
  status: 401,
  body: {
    error: "control token required",
    detail: `send Authorization: Bearer <control token>, or ${CONTROL_TOKEN_HEADER}: <control token>`,
  },
};
const AGENT_TOKEN_ELSEWHERE: AccessRefusal = {
  status: 401,
  body: {
    error: "agent token refused here",
    detail: "a computer's agent token opens that computer's DevTools (/computers/<name>/cdp) and nothing else",
  },
};

const OWN_HEADER = CONTROL_TOKEN_HEADER.toLowerCase();

export class Access {
  private readonly agentTokens: ReadonlyMap<string, string>;
  private readonly agentSecrets: SecretTokens | undefined;

  constructor(
    private readonly controlToken: string,
    computers: readonly string[],
  ) {
    this.agentTokens = new Map(computers.map((name) => [name, computerAgentToken(controlToken, name)]));
    this.agentSecrets = computers.length > 0 ? secretTokens([...this.agentTokens.values()]) : undefined;
  }

  /** Every computer's agent token: no site may see one (the forwarder strips them). */
  tokens(): string[] {
    return [...this.agentTokens.values()];
  }

  /** Why `req` may not use `target` on `listener`, or undefined when it may. */
  refusal(listener: Listener, req: IncomingMessage, target: Route): AccessRefusal | undefined {
    const own = ownHeader(req);
    if (target.kind === "computer" && target.op === "cdp" && listener === "published") {
      const expected = this.agentTokens.get(target.computer);
      if (expected !== undefined && this.presents(req, own, expected)) return undefined;
    }
    if (this.carriesAgentToken(req)) return AGENT_TOKEN_ELSEWHERE;
    if (listener === "browse" || target.kind === "healthz") return undefined;
    return this.presents(req, own, this.controlToken) ? undefined : CONTROL_TOKEN_REQUIRED;
  }

  /** True when `req` was admitted to `computer`'s DevTools by that computer's agent token (not the control token). */
  admitsAsAgent(req: IncomingMessage, computer: string): boolean {
    const expected = this.agentTokens.get(computer);
    return expected !== undefined && this.presents(req, ownHeader(req), expected);
  }

  /** True when `token` is presented as `Authorization: Bearer <token>` or as the gateway's own header's value. */
  private presents(req: IncomingMessage, own: string | undefined, token: string): boolean {
    const inOwnHeader = tokensEqual(own ?? "", token) && own !== undefined;
    return carriesControlToken(req.headers.authorization, token) || inOwnHeader;
  }

  /** True when any Authorization or own header of `req`, in any form a site could decode, carries an agent token. */
  private carriesAgentToken(req: IncomingMessage): boolean {
    const secrets = this.agentSecrets;
    if (secrets === undefined) return false;
    const raw = req.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i].toLowerCase();
      if (name !== "authorization" && name !== OWN_HEADER) continue;
      if (withoutTokens(raw[i + 1], secrets) !== raw[i + 1]) return true;
    }
    return false;
  }
}

/** The gateway's own header, when sent once (a repeated one, which node joins with commas, presents no token). */
function ownHeader(req: IncomingMessage): string | undefined {
  const value = req.headers[OWN_HEADER];
  return typeof value === "string" ? value.trim() : undefined;
}
