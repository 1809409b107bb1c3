// Who may use which route of the gateway. Two credentials open anything:
// - the control token (the runner's): every route of the published listener, `/healthz` being open to anyone;
// - a computer's agent token (an agent harness's): that one computer's DevTools, `/computers/<name>/cdp...`, on the
//   published listener, and nothing else on either listener.
// Either is presented as `Authorization: Bearer <token>` or in the gateway's own header (CONTROL_TOKEN_HEADER), which
// leaves Authorization to a site's own credential. An agent token anywhere but its own DevTools route is refused
// (401) even beside the control token, in any form a site could decode it back from: a computer cannot spend it on
// another computer, a site's data plane or a synthetic site's pages. Credentials the gateway cannot read through within
// their budget (credentials.ts) are refused too (431), on every route they would be read on: they may carry one.
import type { IncomingMessage } from "node:http";
import {
  carriesControlToken,
  computerAgentToken,
  CONTROL_TOKEN_HEADER,
  DECODING_BUDGET_PER_CHAR,
  tokensEqual,
} from "../protocol/auth";
import type { Listener } from "./bind";
import type { CredentialReader } from "./credentials";
import type { Route } from "./routes";

export interface AccessRefusal {
  status: 401 | 431;
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

/** The refusal of a request whose `header` could not be read through within the request's budget. */
function undecidedRefusal(header: string): AccessRefusal {
  return {
    status: 431,
    body: {
      error: "credential too costly to read",
      detail:
        `${header}: its encodings could not be read through for tokens within ${DECODING_BUDGET_PER_CHAR} characters ` +
        "of work per character of the request's credentials, and the gateway sends on no value it could not read; " +
        "send the credential with fewer layers of encoding",
    },
  };
}

const OWN_HEADER = CONTROL_TOKEN_HEADER.toLowerCase();

export class Access {
  private readonly agentTokens: ReadonlyMap<string, string>;

  constructor(
    private readonly controlToken: string,
    computers: readonly string[],
  ) {
    this.agentTokens = new Map(computers.map((name) => [name, computerAgentToken(controlToken, name)]));
  }

  /** Every computer's agent token: no site may see one (the forwarder strips them). */
  tokens(): string[] {
    return [...this.agentTokens.values()];
  }

  /**
   * Why `req` may not use `target` on `listener`, or undefined when it may. Its credentials are read (`credentials`,
   * once per request) unless it presents an agent token on that computer's own DevTools route.
   */
  refusal(
    listener: Listener,
    req: IncomingMessage,
    target: Route,
    credentials: CredentialReader,
  ): AccessRefusal | undefined {
    const own = ownHeader(req);
    if (target.kind === "computer" && target.op === "cdp" && listener === "published") {
      const expected = this.agentTokens.get(target.computer);
      if (expected !== undefined && this.presents(req, own, expected)) return undefined;
    }
    const read = credentials.read(req);
    if (read.agentToken) return AGENT_TOKEN_ELSEWHERE;
    if (read.undecided !== undefined) return undecidedRefusal(read.undecided);
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
}

/** The gateway's own header, when sent once (a repeated one, which node joins with commas, presents no token). */
function ownHeader(req: IncomingMessage): string | undefined {
  const value = req.headers[OWN_HEADER];
  return typeof value === "string" ? value.trim() : undefined;
}
