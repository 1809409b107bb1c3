// The control token opens the gateway's own operations and never reaches a site.
import type http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import {
  bearer,
  carriesControlToken,
  computerControlToken,
  parseBearer,
  secretTokens,
  tokenProblem,
  tokensEqual,
  withoutControlToken,
  withoutTokens,
  WWW_AUTHENTICATE_CHALLENGE,
} from "../../src/protocol/auth";
import { echoHandler, headerValues, rawExchange, startUpstream, type Echo, type Upstream } from "../helpers/servers";
import { CONTROL_LINE, request, startGateway, TOKEN, type GatewayProcess } from "./helpers";

describe("control token comparison", () => {
  it("accepts only the exact token, whatever the lengths, without throwing", () => {
    expect(tokensEqual(TOKEN, TOKEN)).toBe(true);
    expect(tokensEqual(`${TOKEN}x`, TOKEN)).toBe(false);
    expect(tokensEqual(TOKEN.slice(1), TOKEN)).toBe(false);
    expect(tokensEqual("", TOKEN)).toBe(false);
  });

  it("reads a Bearer value case-insensitively in its scheme only", () => {
    expect(parseBearer("Bearer abc")).toBe("abc");
    expect(parseBearer("bearer abc")).toBe("abc");
    expect(parseBearer("Basic abc")).toBeUndefined();
    expect(carriesControlToken(bearer(TOKEN), TOKEN)).toBe(true);
    expect(carriesControlToken(`Bearer ${TOKEN.toUpperCase()}`, TOKEN)).toBe(false);
    expect(carriesControlToken(undefined, TOKEN)).toBe(false);
  });
});

const basic = (userPass: string) => `Basic ${Buffer.from(userPass).toString("base64")}`;

/** Every way a client may write the control token into Authorization; none may reach a site. */
const CARRYING = [
  `Bearer ${TOKEN}`,
  `bearer ${TOKEN}`,
  `BEARER\t${TOKEN}`,
  `Bearer   ${TOKEN}   `,
  `Bearer "${TOKEN}"`,
  `Bearer "${[...TOKEN].map((c) => `\\${c}`).join("")}"`,
  `Bearer token="${TOKEN}"`,
  `Token ${TOKEN}`,
  TOKEN,
  basic(`runner:${TOKEN}`),
  basic(`${TOKEN}:`),
];

const percentEncodedWhole = (text: string) => [...text].map((c) => `%${c.charCodeAt(0).toString(16)}`).join("");
const base64 = (text: string) => Buffer.from(text).toString("base64");

/** The token written so that a site could decode it back: percent-encoded, `+` for a space, base64, and nested. */
const ENCODED = [
  `Bearer%20${TOKEN}`,
  `Bearer+${TOKEN}`,
  `Bearer%09${TOKEN}`,
  `bearer%2520${TOKEN}`,
  `Bearer ${percentEncodedWhole(TOKEN)}`,
  encodeURIComponent(`Bearer ${TOKEN}`),
  `Bearer ${base64(TOKEN)}`,
  `Bearer ${Buffer.from(TOKEN).toString("base64url")}`,
  `Basic ${base64(`Bearer ${TOKEN}`)}`,
  `Basic ${base64(`runner:${encodeURIComponent(TOKEN)}`)}`,
  `Token ${base64(`Bearer%20${TOKEN}`)}`,
  `Bearer ${encodeURIComponent(base64(TOKEN))}`,
];

const hex = (text: string) => Buffer.from(text).toString("hex");
/** `text` with `junk` put in every `every` characters: what a lenient decoder skips. */
const sprinkled = (text: string, junk: string, every = 3) =>
  text.replace(new RegExp(`(.{${every}})`, "g"), `$1${junk}`);
/** `n` characters of base64 of binary bytes: an opaque credential's word. */
const opaque = (n: number) =>
  Buffer.from(Array.from({ length: n }, (_, i) => (i * 7919) % 251))
    .toString("base64")
    .slice(0, n);
const nestedBase64 = (text: string, depth: number) => {
  let out = text;
  for (let i = 0; i < depth; i++) out = base64(out);
  return out;
};

/**
 * The token as a site's lenient decoder reads it back: node's and Python's base64 decoders skip what is not of the
 * alphabet, read from wherever a site starts; nested deeper than three; hex.
 */
const LENIENT = [
  `Basic ${sprinkled(base64(`runner:${TOKEN}`), ".")}`,
  `Basic ${sprinkled(base64(`runner:${TOKEN}`), " ")}`,
  `Basic ${sprinkled(base64(`runner:${TOKEN}`), "*")}`,
  `Basic ${sprinkled(base64(`runner:${TOKEN}`), ",", 5)}`,
  `Basic ${sprinkled(base64(`runner:${TOKEN}`), "!~", 1)}`,
  `Basic xy${base64(`Bearer ${TOKEN}`)}`,
  `Basic ${nestedBase64(`Bearer ${TOKEN}`, 4)}`,
  `Basic ${nestedBase64(TOKEN, 6)}`,
  `Basic ${sprinkled(nestedBase64(`Bearer ${TOKEN}`, 4), ".", 7)}`,
  `Bearer ${hex(TOKEN)}`,
  `Bearer ${hex(TOKEN).toUpperCase()}`,
  `Basic ${hex(`runner:${TOKEN}`)}`,
  `Bearer ${sprinkled(hex(TOKEN), ":", 2)}`,
  `Basic ${base64(hex(`Bearer ${TOKEN}`))}`,
  `Bearer ${hex(base64(encodeURIComponent(TOKEN)))}`,
  // One word encoded twice among others: the value's base64 decodes it amid the junk its other words make.
  `Bearer ${opaque(100)} ${base64(base64(`Bearer ${TOKEN}`))}`,
  `Bearer ${opaque(2000)} ${base64(base64(encodeURIComponent(`Bearer ${TOKEN}`)))} ${opaque(2000)}`,
  `Basic ${opaque(64)}.${hex(base64(`runner:${TOKEN}`))}`,
];

describe("control token on the wire", () => {
  it.each(CARRYING)("removes every form that carries it: %s", (value) => {
    expect(withoutControlToken(value, TOKEN)).toBeUndefined();
  });

  it.each(ENCODED)("removes every form a site could decode back to it: %s", (value) => {
    expect(withoutControlToken(value, TOKEN)).toBeUndefined();
  });

  it.each(LENIENT)("removes every form a lenient decoder reads back to it: %s", (value) => {
    expect(withoutControlToken(value, TOKEN)).toBeUndefined();
  });

  it("keeps a site's own large credentials that decode to no token", () => {
    const jwt = `Bearer ${Buffer.from(JSON.stringify({ alg: "HS256" })).toString("base64url")}.${Buffer.from(
      JSON.stringify({ sub: "user", scope: "read:orders ".repeat(800), iat: 1700000000 }),
    ).toString("base64url")}.${"c".repeat(43)}`;
    const random = `Bearer ${Buffer.from(Array.from({ length: 11_000 }, (_, i) => (i * 7919) % 251)).toString("base64")}`;
    for (const value of [jwt, random, `Basic ${hex("user:pass".repeat(1000))}`])
      expect(withoutControlToken(value, TOKEN), value.slice(0, 40)).toBe(value);
  });

  it("removes each of several tokens, and a token holding a + written after Bearer+", () => {
    const computer = computerControlToken(TOKEN, "agent");
    const secrets = secretTokens([TOKEN, computer]);
    for (const value of [`Bearer ${computer}`, `Bearer%20${computer}`, `Bearer+${TOKEN}`, basic(`x:${computer}`)])
      expect(withoutTokens(value, secrets), value).toBeUndefined();
    expect(withoutTokens(`Bearer ${computer}, Bearer site-own`, secrets)).toBe("Bearer site-own");
    const plussed = "abc+def/ghi+jkl-mno.pqr_stu~vwx+yz0123";
    for (const value of [`Bearer+${plussed}`, `Bearer%2B${plussed}`, `Bearer ${plussed}`])
      expect(withoutControlToken(value, plussed), value).toBeUndefined();
    expect(withoutControlToken(`Bearer ${plussed}x`, plussed)).toBe(`Bearer ${plussed}x`);
  });

  it("sends no credentials that spell a token once the one carrying another token is taken out", () => {
    // Two halves of the computer's token, each clean alone, which a lenient hex decoder reads back as one once the
    // credential between them (carrying the control token) is gone: what is kept is read again as a whole.
    const computer = computerControlToken(TOKEN, "agent");
    const halves = [computer.slice(0, 32), computer.slice(32)].map((half) => hex(half));
    const value = `X ${halves[0]}, X ${TOKEN}, X ${halves[1]}`;
    expect(withoutTokens(value, secretTokens([TOKEN, computer]))).toBeUndefined();
    expect(withoutTokens(`X ${halves[0]}, X ${TOKEN}`, secretTokens([TOKEN, computer]))).toBe(`X ${halves[0]}`);
  });

  it("keeps the other credentials of a comma-separated list, and values that never carried it", () => {
    expect(withoutControlToken(`Bearer ${TOKEN}, Bearer site-own`, TOKEN)).toBe("Bearer site-own");
    expect(withoutControlToken(`Bearer site-own,Bearer\t${TOKEN}`, TOKEN)).toBe("Bearer site-own");
    expect(withoutControlToken(`Digest username="a,b", realm="x", Bearer ${TOKEN}`, TOKEN)).toBe(
      'Digest username="a,b", realm="x"',
    );
    for (const value of [
      "Bearer site-own",
      `Bearer ${TOKEN}x`,
      `Bearer%20${TOKEN}x`,
      `Bearer ${base64(`${TOKEN}x`)}`,
      basic("user:pass"),
      'Digest username="a", response="b"',
      "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyIn0.c2lnbmF0dXJlLW9mLXRoZS1zaXRlcy1vd24tand0",
    ]) {
      expect(withoutControlToken(value, TOKEN), value).toBe(value);
    }
  });

  it('derives a computer\'s control token as HMAC-SHA256(control token, "multienv computer control\\n" + computer), hex', () => {
    // Values from `printf 'multienv computer control\n<computer>' | openssl dgst -sha256 -hmac <token>`.
    expect(computerControlToken(TOKEN, "agent")).toBe(
      "105935ed06082ebc74a52e2d332d45719e3a5444b49efaf01707fb41cdf8d3c2",
    );
    expect(computerControlToken(TOKEN, "shop-agent")).toBe(
      "cc51b6284e2791e04b57fb539efc4b9c07a5d363db65b70a62e4051c9e68a3d3",
    );
    expect(tokenProblem(computerControlToken(TOKEN, "agent"))).toBeUndefined();
  });

  it("refuses a token that is missing, blank, padded or mostly whitespace, or short", () => {
    expect(tokenProblem(undefined)).toBe("is not set");
    expect(tokenProblem("")).toBe("is not set");
    expect(tokenProblem(" \t ".repeat(12))).toBe("is blank");
    expect(tokenProblem(`   ${"a".repeat(8)}${" ".repeat(30)}`)).toMatch(/whitespace/);
    expect(tokenProblem(` ${TOKEN}`)).toMatch(/whitespace/);
    expect(tokenProblem(`${"a".repeat(20)} ${"b".repeat(20)}`)).toMatch(/whitespace/);
    expect(tokenProblem("a".repeat(31))).toBe("is shorter than 32 characters");
    expect(tokenProblem(TOKEN)).toBeUndefined();
  });
});

describe("gateway and the control token", () => {
  let gateway: GatewayProcess;
  let site: Upstream;
  let wss: WebSocketServer;
  const upgrades: http.IncomingMessage[] = [];

  beforeAll(async () => {
    site = await startUpstream(echoHandler("site"));
    wss = new WebSocketServer({ server: site.server });
    wss.on("connection", (socket, req) => {
      upgrades.push(req);
      socket.send("hi");
    });
    gateway = await startGateway({
      sites: { shop: { server: site.url } },
      capturesDir: "/nonexistent-captures",
      computers: { agent: { cdp: "http://127.0.0.1:9" } },
    });
  });
  afterAll(async () => {
    await gateway?.stop();
    wss?.close();
    await site?.close();
  });

  const seenBy = async (headers: string[]): Promise<string[]> => {
    const answer = await request(`${gateway.url}/svc/shop/whoami`, { headers });
    return headerValues((JSON.parse(answer.body) as Echo).rawHeaders, "authorization");
  };

  it("removes Authorization from a proxied request when it carries the control token", async () => {
    expect(await seenBy(["Authorization", `Bearer ${TOKEN}`])).toEqual([]);
    expect(await seenBy(["Authorization", `bearer ${TOKEN}`])).toEqual([]);
  });

  it("removes the control token in every form a client may write it, repeated headers and lists included", async () => {
    for (const value of CARRYING) expect(await seenBy(["Authorization", value]), value).toEqual([]);
    for (const value of ENCODED) expect(await seenBy(["Authorization", value]), value).toEqual([]);
    expect(await seenBy(["Authorization", `Bearer ${TOKEN}`, "Authorization", `bearer\t"${TOKEN}"`])).toEqual([]);
    expect(
      await seenBy(["Authorization", `Bearer site-own, Bearer ${TOKEN}`, "Authorization", basic(`x:${TOKEN}`)]),
    ).toEqual(["Bearer site-own"]);
    // Bytes no client library would send: tabs around the value, a bare list.
    const raw = await rawExchange(
      gateway.port,
      `GET /svc/shop/whoami HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Authorization:\t Bearer \t${TOKEN}\t\r\nAuthorization: ,Bearer ${TOKEN},\r\nConnection: close\r\n\r\n`,
    );
    const text = raw.toString("latin1");
    expect(text).not.toContain(TOKEN);
    // Encoded, and a computer's token: what reached the site is echoed back whole, so none of it may be there.
    const computer = computerControlToken(TOKEN, "agent");
    for (const value of [`Bearer%20${TOKEN}`, `Bearer+${TOKEN}`, `Bearer%09${TOKEN}`, `Bearer ${computer}`]) {
      const echoed = (
        await rawExchange(
          gateway.port,
          `GET /svc/shop/whoami HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Authorization: ${value}\r\nConnection: close\r\n\r\n`,
        )
      ).toString("latin1");
      expect(echoed, value).not.toContain(TOKEN);
      expect(echoed, value).not.toContain(computer);
    }
    expect(
      headerValues((JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4)) as Echo).rawHeaders, "authorization"),
    ).toEqual([]);
  });

  it("removes the token however a lenient decoder would read it, on the raw socket: nothing of it reaches the site", async () => {
    const agent = computerControlToken(TOKEN, "agent");
    for (const value of [...LENIENT, `Basic ${sprinkled(base64(`x:${agent}`), ".")}`, `Bearer ${hex(agent)}`]) {
      const echoed = (
        await rawExchange(
          gateway.port,
          `GET /svc/shop/whoami HTTP/1.1\r\nHost: gw\r\n${CONTROL_LINE}Authorization: ${value}\r\nConnection: close\r\n\r\n`,
        )
      ).toString("latin1");
      expect(echoed.split("\r\n")[0], value).toBe("HTTP/1.1 200 OK");
      const seen = JSON.parse(echoed.slice(echoed.indexOf("\r\n\r\n") + 4)) as Echo;
      expect(headerValues(seen.rawHeaders, "authorization"), value).toEqual([]);
      expect(echoed, value).not.toContain(TOKEN);
    }
  });

  it("passes a site's own bearer token, and any other Authorization, through unchanged", async () => {
    expect(await seenBy(["Authorization", "Bearer the-site-own-token"])).toEqual(["Bearer the-site-own-token"]);
    expect(await seenBy(["Authorization", `Bearer ${TOKEN}x`])).toEqual([`Bearer ${TOKEN}x`]);
    expect(await seenBy(["Authorization", "Basic dXNlcjpwYXNz"])).toEqual(["Basic dXNlcjpwYXNz"]);
    expect(await seenBy(["Authorization", `Bearer ${TOKEN}`, "Authorization", "Bearer site"])).toEqual(["Bearer site"]);
  });

  it("removes the control token from a WebSocket upgrade too", async () => {
    const socket = new WebSocket(`ws://127.0.0.1:${gateway.port}/svc/shop/ws`, {
      headers: { Authorization: `Bearer ${TOKEN}` },
    });
    await new Promise((resolve, reject) => {
      socket.once("message", resolve);
      socket.once("error", reject);
    });
    socket.close();
    expect(upgrades.at(-1)!.headers.authorization).toBeUndefined();
  });

  it("requires the token for its own operations: 401 with WWW-Authenticate", async () => {
    for (const path of [
      "/traffic/v1/captures",
      "/traffic/v1/captures/shop-server.pcap0",
      "/computers/agent/cdp/json/version",
      "/computers/agent/proxy-log",
      "/computers/agent/connections/end",
    ]) {
      for (const headers of [{}, { Authorization: "Bearer wrong" }, { Authorization: `Basic ${TOKEN}` }] as Array<
        Record<string, string>
      >) {
        const answer = await request(gateway.url + path, { headers, control: false });
        expect(answer.status, `${path} ${JSON.stringify(headers)}`).toBe(401);
        expect(answer.headers["www-authenticate"]).toBe(WWW_AUTHENTICATE_CHALLENGE);
        expect(JSON.parse(answer.body).error).toBe("control token required");
      }
    }
  });

  it("refuses a CDP WebSocket without the token", async () => {
    const status = await new Promise<number>((resolve) => {
      const socket = new WebSocket(`ws://127.0.0.1:${gateway.port}/computers/agent/cdp/devtools/browser/x`);
      socket.on("unexpected-response", (_req, res) => resolve(res.statusCode!));
      socket.on("error", () => undefined);
    });
    expect(status).toBe(401);
  });
});
