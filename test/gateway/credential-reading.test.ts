// What a request's credentials cost the gateway, and what it does with those it cannot read: each Authorization value
// and its own header are read once per request, for access and for forwarding alike, against one budget for all of
// them (decodingBudget of their characters together), however a client nests their encodings or spreads them over
// headers and list items; a request that cannot be read within it is refused with one line and nothing of it reaches a
// site. The work is the reading's own count (tokenReadingWork), so a loaded machine moves nothing here: the first part
// runs the gateway's server in this process, on real sockets, and reads the count around each request.
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { computerAgentToken, decodedFormsVerdict, decodingBudget, secretTokens } from "../../src/protocol/auth";
import { tokenReadingWork } from "../../src/protocol/token-reading";
import { parseGatewayConfig } from "../../src/gateway/config";
import { start, type RunningGateway } from "../../src/gateway/server";
import { echoHandler, headerValues, rawExchange, startUpstream, type Echo, type Upstream } from "../helpers/servers";
import { CONTROL_LINE, startGateway, TOKEN, type GatewayProcess } from "./helpers";

const COMPUTERS = ["a", "b", "c", "d"];
const AGENT = computerAgentToken(TOKEN, "a");
const SIZE = 15 * 1024;

const base64 = (text: string) => Buffer.from(text, "latin1").toString("base64");
const letters = (n: number) => randomBytes(n).toString("base64url").slice(0, n);
const nested = (depth: number, size = SIZE) => {
  let inner = letters(Math.ceil(size * Math.pow(3 / 4, depth)));
  for (let i = 0; i < depth; i++) inner = base64(inner);
  return `Basic ${inner}`.slice(0, size);
};

/** Raw header lines (`Name: value\r\n`) for each [name, value]. */
const lines = (headers: [string, string][]) => headers.map(([name, value]) => `${name}: ${value}\r\n`).join("");
const authorization = (...values: string[]): [string, string][] => values.map((value) => ["Authorization", value]);

/**
 * Credentials made for the most reading per byte, each about 15 KB: one value whose every layer is text (read to its
 * end, and kept), values past the budget, and the same bytes spread over ten headers, over a list, over both headers.
 */
const CRAFTED: Record<string, [string, string][]> = {
  "base64 of base64 of text (kept)": authorization(nested(2)),
  "token-long words with + between (kept)": authorization(
    `Bearer ${`${letters(64)}+${letters(35)} `.repeat(SIZE / 100)}`.slice(0, SIZE),
  ),
  "base64 nested 4 deep": authorization(nested(4)),
  "escapes within long base64 runs": authorization(`Bearer ${`%25252B${letters(44)}\\+`.repeat(SIZE / 52)}`),
  "ten Authorization headers of 1.5 KB nested 4 deep": authorization(
    ...Array.from({ length: 10 }, () => nested(4, SIZE / 10)),
  ),
  "a list of ten credentials nested 4 deep": authorization(
    Array.from({ length: 10 }, () => nested(4, SIZE / 10)).join(", "),
  ),
  "forty headers of 384 bytes nested 4 deep": authorization(...Array.from({ length: 40 }, () => nested(4, 384))),
  "Authorization and the gateway's own header": [
    ["Authorization", nested(2, SIZE / 2)],
    ["X-Multienv-Token", nested(2, SIZE / 2)],
  ],
};

describe("the work one request's credentials cost the gateway", () => {
  let gateway: RunningGateway;
  let site: Upstream;
  let browse: number;

  beforeAll(async () => {
    site = await startUpstream(echoHandler("site"));
    const computer = { cdp: "http://127.0.0.1:1/cdp", proxyLog: "http://127.0.0.1:1/log" };
    const config = parseGatewayConfig(
      JSON.stringify({
        listen: { host: "127.0.0.1", port: 0 },
        browse: { hosts: ["127.0.0.1"], port: 0 },
        sites: { shop: { server: site.url, frontend: site.url } },
        computers: Object.fromEntries(COMPUTERS.map((name) => [name, computer])),
      }),
    );
    gateway = await start(config, TOKEN, {
      bindings: [
        { listener: "published", host: "127.0.0.1", address: "127.0.0.1", port: 0 },
        { listener: "browse", host: "127.0.0.1", address: "127.0.0.1", port: 0 },
      ],
      log: () => undefined,
    });
    browse = gateway.bound.find((binding) => binding.listener === "browse")!.port;
  });
  afterAll(async () => {
    await gateway?.close();
    await site?.close();
  });

  /** A page request on the browse listener, as a computer's site proxy sends one: its status, and the work it cost. */
  async function page(headers: [string, string][]): Promise<{ status: number; work: number }> {
    const before = tokenReadingWork();
    const answer = await rawExchange(
      browse,
      `GET /website/shop/p HTTP/1.1\r\nHost: shop.test\r\n${lines(headers)}Connection: close\r\n\r\n`,
    );
    return { status: Number(answer.toString("latin1").split(" ")[1]), work: tokenReadingWork() - before };
  }

  const credentialChars = (headers: [string, string][]) => headers.reduce((n, [, value]) => n + value.length, 0);

  it.each(Object.entries(CRAFTED))(
    "stays within one budget for all of a request's credentials: %s",
    async (_, headers) => {
      expect(credentialChars(headers)).toBeGreaterThan(SIZE * 0.9);
      const { status, work } = await page(headers);
      // A reading may pass its budget by the few passes over one form it makes before it looks at the count again.
      const budget = decodingBudget(credentialChars(headers));
      expect(work / budget, `${work} characters of work against a budget of ${budget}`).toBeLessThan(1.1);
      // Kept whole, or refused as too costly to read: never taken for an agent token (401).
      expect([200, 431], `answered ${status}`).toContain(status);
    },
  );

  it("reads a plain value once for access and forwarding together, and sends it on whole", async () => {
    const value = `Bearer ${letters(SIZE)}`;
    const before = tokenReadingWork();
    const once = decodedFormsVerdict(value, secretTokens([TOKEN]).shortest, decodingBudget(value.length), () => false);
    const oneReading = tokenReadingWork() - before;
    expect(once).toBe("clean");
    const sent = await rawExchange(
      browse,
      `GET /website/shop/p HTTP/1.1\r\nHost: shop.test\r\nAuthorization: ${value}\r\nConnection: close\r\n\r\n`,
    );
    const text = sent.toString("latin1");
    expect(text.split(" ")[1]).toBe("200");
    const echo = JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)) as Echo;
    expect(headerValues(echo.rawHeaders, "authorization")).toEqual([value]);
    const { work } = await page(authorization(value));
    expect(work / oneReading, `${work} characters of work, one reading being ${oneReading}`).toBeLessThan(1.05);
  });
});

describe("credentials the gateway cannot read through, or that carry a token", () => {
  let gateway: GatewayProcess;
  let site: Upstream;
  const seenBySite: Echo[] = [];
  let browse: { address: string; port: number };

  beforeAll(async () => {
    site = await startUpstream(
      echoHandler("site", (req) =>
        seenBySite.push({ method: "", url: req.url ?? "", rawHeaders: req.rawHeaders, body: "" }),
      ),
    );
    const computer = { cdp: "http://127.0.0.1:1/cdp", proxyLog: "http://127.0.0.1:1/log" };
    gateway = await startGateway({
      browse: { hosts: ["127.0.0.2"], port: 0 },
      sites: { shop: { server: site.url, frontend: site.url } },
      computers: Object.fromEntries(COMPUTERS.map((name) => [name, computer])),
    });
    const listeners = gateway.logs.find((line) => line.event === "listening")!.listeners as Array<{
      listener: string;
      address: string;
      port: number;
    }>;
    browse = listeners.find((binding) => binding.listener === "browse")!;
  });
  afterAll(async () => {
    await site?.close();
    await gateway?.stop();
  });

  const statusOf = (answer: Buffer) => Number(answer.toString("latin1").split(" ")[1]);
  const bodyOf = (answer: Buffer) => {
    const text = answer.toString("latin1");
    return text.slice(text.indexOf("\r\n\r\n") + 4);
  };

  it("refuses a request it cannot read within the budget with 431 and one line naming the header; the site sees nothing", async () => {
    const before = seenBySite.length;
    for (const headers of [
      CRAFTED["base64 nested 4 deep"],
      CRAFTED["ten Authorization headers of 1.5 KB nested 4 deep"],
    ]) {
      const page = await rawExchange(
        browse.port,
        `GET /website/shop/crafted HTTP/1.1\r\nHost: shop.test\r\n${lines(headers)}Connection: close\r\n\r\n`,
        5_000,
        browse.address,
      );
      expect(statusOf(page)).toBe(431);
      expect(JSON.parse(bodyOf(page))).toMatchObject({
        error: "credential too costly to read",
        detail: expect.stringMatching(/^Authorization: .*fewer layers of encoding$/),
      });
      // On the published listener, beside the control token, likewise: the control token opens nothing unread.
      const svc = await rawExchange(
        gateway.port,
        `GET /svc/shop/crafted HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}${lines(headers)}Connection: close\r\n\r\n`,
      );
      expect(statusOf(svc)).toBe(431);
    }
    await gateway.waitForLog(
      (entry) =>
        entry.event === "request-refused" && entry.status === 431 && entry.reason === "credential too costly to read",
    );
    expect(seenBySite.length).toBe(before);
  });

  /** The agent token of computer `a` hidden in nested encodings, within a large value or a short one. */
  const hiddenAgent = [
    `Basic ${base64(base64(base64(base64(`agent:${AGENT}`))))}`,
    `Bearer ${letters(7 * 1024)} ${base64(base64(encodeURIComponent(`Bearer ${AGENT}`)))} ${letters(7 * 1024)}`,
    `Bearer ${letters(100)} ${base64(base64(`Bearer ${AGENT}`))}`,
    `Bearer ${TOKEN}, Basic ${base64(base64(`x:${AGENT}`))}`,
    `Digest realm="a,b", Bearer ${Buffer.from(base64(AGENT)).toString("hex")}`,
  ];

  it("still refuses an agent token hidden in nested encodings, beside the control token or in a large value", async () => {
    const before = seenBySite.length;
    for (const value of hiddenAgent) {
      const page = await rawExchange(
        browse.port,
        `GET /website/shop/p HTTP/1.1\r\nHost: shop.test\r\nAuthorization: ${value}\r\nConnection: close\r\n\r\n`,
        5_000,
        browse.address,
      );
      expect(statusOf(page), value.slice(0, 60)).toBe(401);
      const svc = await rawExchange(
        gateway.port,
        `GET /svc/shop/p HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Authorization: ${value}\r\nConnection: close\r\n\r\n`,
      );
      expect(statusOf(svc), value.slice(0, 60)).toBe(401);
      expect(JSON.parse(bodyOf(svc)).error).toBe("agent token refused here");
    }
    expect(seenBySite.length).toBe(before);
  });

  it("sends on no credential left of a list whose kept part still decodes to a token", async () => {
    // The control token in base64 cut in two at a comma, beside the control token itself: each credential of the
    // list read alone carries none, but what is left once the first is removed decodes to it again.
    const encoded = base64(`runner:${TOKEN}`);
    const cut = 4 * Math.floor(encoded.length / 8);
    const value = `Bearer ${TOKEN}, Basic ${encoded.slice(0, cut)}, ${encoded.slice(cut)}`;
    const answer = await rawExchange(
      gateway.port,
      `GET /svc/shop/split HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Authorization: ${value}\r\nConnection: close\r\n\r\n`,
    );
    expect(statusOf(answer)).toBe(200);
    const echo = JSON.parse(bodyOf(answer)) as Echo;
    expect(headerValues(echo.rawHeaders, "authorization")).toEqual([]);
    // A site's own credential beside the control token is still sent on.
    const kept = await rawExchange(
      gateway.port,
      `GET /svc/shop/own HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Authorization: Bearer ${TOKEN}, Bearer site-own\r\nConnection: close\r\n\r\n`,
    );
    expect(headerValues((JSON.parse(bodyOf(kept)) as Echo).rawHeaders, "authorization")).toEqual(["Bearer site-own"]);
  });
});
