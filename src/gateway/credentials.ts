// What a request's credentials carry, read once per request: each Authorization value and the gateway's own header
// (CONTROL_TOKEN_HEADER), in every form a site could decode them back from (auth.ts, decodedFormsVerdict), against one
// budget for the whole request: decodingBudget of all their characters together. So a client spends the gateway's CPU
// no faster than the header bytes it sends, however it nests their encodings or spreads them over several headers or
// list items. Access (is an agent token anywhere?) and the forwarder (what of each Authorization value may reach a
// site) ask the same reading; a retried dispatch asks it again for nothing.
//
// A request whose credentials cannot be read through within that budget is undecided: access refuses it (431) and
// nothing of its Authorization is ever forwarded, stripped or not, since what could not be read may carry a token.
import type { IncomingMessage } from "node:http";
import {
  CONTROL_TOKEN_HEADER,
  decodedFormsVerdict,
  decodingBudget,
  formCarries,
  secretTokens,
  withoutCarryingCredentials,
  type CredentialVerdict,
  type SecretTokens,
} from "../protocol/auth";
import { tokenReadingWork } from "../protocol/token-reading";

const OWN_HEADER = CONTROL_TOKEN_HEADER.toLowerCase();

/** What one request's credentials carry. */
export interface RequestCredentials {
  /** A computer's agent token stands in some form of some value. */
  readonly agentToken: boolean;
  /** The header (as the client wrote its name) whose value could not be read through within the request's budget. */
  readonly undecided: string | undefined;
  /** The reading's work, in characters as decodedFormsVerdict counts them (at most about the request's budget). */
  readonly work: number;
  /**
   * The Authorization value at `index` of the request's raw headers as it may reach a site, every credential carrying
   * a token removed; undefined to send none. Nothing when an agent token was found or the reading was undecided.
   */
  forwarded(index: number): string | undefined;
}

/**
 * Up to this many tokens, a form is searched for each (the engine's string search steps over most characters of a
 * form a token is not in) before formCarries reads its words, which a token found in it must be among: a third of
 * the reading's CPU on a 15 KB value, with the eleven tokens of an env of five computers. With more, each search
 * costs more than formCarries' one pass, which looks a word up among all tokens at once.
 */
const SEARCHED_TOKENS = 24;

/** A request without Authorization or the own header: nothing to read. */
const NOTHING: RequestCredentials = { agentToken: false, undecided: undefined, work: 0, forwarded: () => undefined };

/** Reads each request's credentials once (see the top of this file). */
export class CredentialReader {
  private readonly readings = new WeakMap<IncomingMessage, RequestCredentials>();
  private readonly agentSecrets: SecretTokens | undefined;
  /** False when no token stands anywhere in a form, so no word of it is one: formCarries need not look. */
  private readonly mayCarry: (form: string) => boolean;

  /** `secrets`: every token no site may see; `agentTokens` (among them): those access refuses wherever they stand. */
  constructor(
    private readonly secrets: SecretTokens,
    agentTokens: readonly string[],
  ) {
    this.agentSecrets = agentTokens.length > 0 ? secretTokens(agentTokens) : undefined;
    const tokens = [...secrets.byLength.values()].flatMap((same) => [...same]);
    this.mayCarry =
      tokens.length > SEARCHED_TOKENS ? () => true : (form) => tokens.some((token) => form.includes(token));
  }

  /** The reading of `req`'s credentials: made on the first call, the same one after. */
  read(req: IncomingMessage): RequestCredentials {
    let reading = this.readings.get(req);
    if (reading === undefined) this.readings.set(req, (reading = this.readNow(req.rawHeaders)));
    return reading;
  }

  private readNow(raw: string[]): RequestCredentials {
    const credentials: number[] = [];
    let chars = 0;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i].toLowerCase();
      if (name !== "authorization" && name !== OWN_HEADER) continue;
      credentials.push(i);
      chars += raw[i + 1].length;
    }
    if (credentials.length === 0) return NOTHING;
    const reading = new Reading(this.secrets, this.agentSecrets, decodingBudget(chars), this.mayCarry);
    const kept = new Map<number, string | undefined>();
    let undecided: string | undefined;
    for (const i of credentials) {
      const value = reading.value(raw[i + 1]);
      if (reading.undecided) undecided = raw[i];
      if (reading.agentToken || reading.undecided) break;
      kept.set(i, value);
    }
    const refused = reading.agentToken || undecided !== undefined;
    return {
      agentToken: reading.agentToken,
      undecided,
      work: reading.work,
      forwarded: (index) => (refused ? undefined : kept.get(index)),
    };
  }
}

/** One request's reading: the budget left to it, and what it found so far. */
class Reading {
  agentToken = false;
  undecided = false;
  work = 0;
  /** A token other than an agent's stands in some form of the text being read. */
  private secretFound = false;

  constructor(
    private readonly secrets: SecretTokens,
    private readonly agentSecrets: SecretTokens | undefined,
    private readonly budget: number,
    private readonly mayCarry: (form: string) => boolean,
  ) {}

  /** `value` with every credential that carries a token removed, by withoutCarryingCredentials' rule. */
  value(value: string): string | undefined {
    return withoutCarryingCredentials(value, (text) => this.verdict(text));
  }

  /**
   * What reading `text` through found, from what is left of the budget: "carries" when it carries a token other than
   * an agent's, "clean" when none, "refused" when it carries an agent token or cannot be read within the budget.
   */
  private verdict(text: string): CredentialVerdict {
    this.secretFound = false;
    const before = tokenReadingWork();
    const verdict = decodedFormsVerdict(
      text,
      this.secrets.shortest,
      Math.max(0, this.budget - this.work),
      this.carries,
    );
    this.work += tokenReadingWork() - before;
    if (verdict === "undecided" && !this.agentToken) this.undecided = true;
    if (this.agentToken || this.undecided) return "refused";
    return verdict === "carries" || this.secretFound ? "carries" : "clean";
  }

  /**
   * Whether the reading of a text may stop at `form`: it holds an agent token, or any token when there are no agent
   * tokens to look for. A form with another token is noted and read on, so an agent token beside it is still found.
   */
  private readonly carries = (form: string): boolean => {
    if (!this.mayCarry(form) || !formCarries(form, this.secrets)) return false;
    if (this.agentSecrets === undefined) return true;
    if (formCarries(form, this.agentSecrets)) {
      this.agentToken = true;
      return true;
    }
    this.secretFound = true;
    return false;
  };
}
