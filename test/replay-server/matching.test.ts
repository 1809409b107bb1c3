// The matching rules, one by one, against Web Page Replay's documented behaviour (catapult's
// web_page_replay_go archive_test.go: fuzzy matching, closest query, header match, tie break, chronological order
// and a new session) and where the replay server is meant to do better than WPR and the tools that replay HARs:
// Playwright's routeFromHAR (first answer only, strict POST bodies), pywb (a POST body read as a query).
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { Episode } from "../../src/replay-server/episode";
import { fieldSet, sharedCount } from "../../src/replay-server/field-set";
import { BODY, fieldsDigest, queryFields, targetWithout, bodyFields } from "../../src/replay-server/fields";
import { ReplayIndex, type IgnoreLists, type IncomingRequest } from "../../src/replay-server/matcher";
import { recordingOf } from "../../src/replay-server/recording";
import {
  answeringMethods,
  bestFieldOverlap,
  canAnswer,
  comparedHeaders,
  headerScore,
  nearestUrl,
  overlapRatio,
  pickInRecordedOrder,
} from "../../src/replay-server/rules";
import { entry, har } from "./helpers";

const NO_IGNORES: IgnoreLists = { ignoreParams: [], ignoreBodyFields: [] };

async function indexOf(entries: unknown[], ignore: IgnoreLists = NO_IGNORES): Promise<ReplayIndex> {
  const recording = await recordingOf(har(entries), "test.har");
  return ReplayIndex.build(recording.exchanges, ignore);
}

function request(url: string, options: Partial<IncomingRequest> & { bodyText?: string; mimeType?: string } = {}) {
  const parsed = new URL(url);
  return {
    method: options.method ?? "GET",
    scheme: parsed.protocol.slice(0, -1),
    host: parsed.host,
    target: parsed.pathname + parsed.search,
    headers: options.headers ?? [],
    body: { mimeType: options.mimeType ?? "", bytes: Buffer.from(options.bodyText ?? "") },
    upgrade: options.upgrade ?? false,
  } satisfies IncomingRequest;
}

const fieldMap = (record: Record<string, string | string[]>) =>
  new Map(Object.entries(record).map(([k, v]) => [k, Array.isArray(v) ? v : [v]]));
const fields = (record: Record<string, string | string[]>, namespace = "") => fieldSet(fieldMap(record), namespace);

/** Serves `req` from `index` as the server does: what it answers, recorded in the episode. */
async function serve(index: ReplayIndex, episode: Episode, req: IncomingRequest) {
  const result = await index.find(req, episode.served);
  episode.record(result.kind, result.kind === "miss" ? undefined : result.exchange.index);
  return result;
}

const bodyOf = (result: Awaited<ReturnType<ReplayIndex["find"]>>) =>
  result.kind === "miss" ? `miss (nearest ${result.nearest})` : result.exchange.responseBody.toString();

describe("overlapRatio: WPR's 2*M/T with M starting at 1", () => {
  it("counts the names whose value lists are equal on both sides", () => {
    // WPR's own example: ?usegapi=1&foo=yay&c=d&a=y against ?usegapi=1&foo=bar&c=d: usegapi and c equal.
    const incoming = fields({ usegapi: "1", foo: "yay", c: "d", a: "y" });
    const recorded = fields({ usegapi: "1", foo: "bar", c: "d" });
    expect(overlapRatio(incoming, recorded)).toBe((2 * 3) / 7);
  });
  it("stays above 0 when nothing overlaps, and a repeated name must repeat alike", () => {
    expect(overlapRatio(fields({ a: "1" }), fields({ b: "1" }))).toBe(1);
    expect(overlapRatio(fields({ a: ["1", "2"] }), fields({ a: ["1"] }))).toBe(1);
    expect(overlapRatio(fields({ a: ["1", "2"] }), fields({ a: ["1", "2"] }))).toBe(2);
    expect(overlapRatio(fields({}), fields({}))).toBe(Infinity);
  });
});

describe("comparedHeaders and headerScore", () => {
  it("leave out pseudo-headers, Host and what the env's proxies add, and compare names in any case", () => {
    const recorded = comparedHeaders([
      { name: ":authority", value: "shop.example" },
      { name: "accept", value: "text/html" },
      { name: "cookie", value: "a=1" },
    ]);
    const incoming = comparedHeaders([
      { name: "Host", value: "gateway:8080" },
      { name: "Accept", value: "text/html" },
      { name: "Cookie", value: "a=1" },
      { name: "X-Forwarded-For", value: "10.0.0.2" },
      { name: "X-Forwarded-Host", value: "shop.example" },
    ]);
    expect([...incoming.keys()]).toEqual(["accept", "cookie"]);
    expect(headerScore(fieldSet(recorded), fieldSet(incoming))).toBe((2 * 3) / 4);
  });
});

describe("answeringMethods", () => {
  it("answers a request from its own method; a HEAD from a recorded GET as well", () => {
    expect(answeringMethods("POST")).toEqual(["POST"]);
    expect(answeringMethods("HEAD")).toEqual(["HEAD", "GET"]);
  });
});

describe("canAnswer", () => {
  it("answers a WebSocket handshake only from a recorded WebSocket, and a plain request never from one", () => {
    expect(canAnswer({ status: 101, isWebSocket: true }, { upgrade: true, conditional: false })).toBe(true);
    expect(canAnswer({ status: 101, isWebSocket: true }, { upgrade: false, conditional: false })).toBe(false);
    expect(canAnswer({ status: 200, isWebSocket: false }, { upgrade: true, conditional: false })).toBe(false);
  });
  it("never answers a request without a validator with a recorded 304", () => {
    expect(canAnswer({ status: 304, isWebSocket: false }, { upgrade: false, conditional: false })).toBe(false);
    expect(canAnswer({ status: 304, isWebSocket: false }, { upgrade: false, conditional: true })).toBe(true);
  });
});

describe("pickInRecordedOrder", () => {
  const tied = [
    { index: 3, score: 1 },
    { index: 5, score: 1 },
    { index: 9, score: 1 },
  ];
  it("serves equal candidates first to last, then the last again", () => {
    const served = new Set<number>();
    const picks = [];
    for (let i = 0; i < 5; i++) {
      const pick = pickInRecordedOrder(tied, served)!;
      served.add(pick);
      picks.push(pick);
    }
    expect(picks).toEqual([3, 5, 9, 9, 9]);
  });
  it("keeps to the best header score: a served better candidate wins over an unserved worse one", () => {
    const mixed = [
      { index: 1, score: 2 },
      { index: 2, score: 0.5 },
    ];
    expect(pickInRecordedOrder(mixed, new Set([1]))).toBe(1);
    expect(pickInRecordedOrder([], new Set())).toBeUndefined();
  });
});

describe("bestFieldOverlap", () => {
  const groups = [
    { url: "https://e.com/i?a=g&c=e", fields: fields({ "?a": "g", "?c": "e" }), first: 0, unserved: true },
    { url: "https://e.com/i?a=f&c=e", fields: fields({ "?a": "f", "?c": "e" }), first: 1, unserved: true },
    { url: "https://e.com/i?a=b&c=d", fields: fields({ "?a": "b", "?c": "d" }), first: 2, unserved: true },
  ];
  it("takes the best ratio, ties to the lexically smaller URL (WPR), then the earlier recording", () => {
    expect(bestFieldOverlap(fields({ "?c": "e" }), groups)).toBe(1);
    expect(bestFieldOverlap(fields({ "?c": "d" }), groups)).toBe(2);
    expect(bestFieldOverlap(fields({}), [])).toBeUndefined();
  });
  it("at one ratio, prefers a group with answers not yet served; all served, the later recording", () => {
    const firstServed = groups.map((g) => ({ ...g, unserved: g.first !== 1 }));
    expect(bestFieldOverlap(fields({ "?c": "e" }), firstServed)).toBe(0);
    const allServed = groups.map((g) => ({ ...g, unserved: false }));
    expect(bestFieldOverlap(fields({ "?c": "e" }), allServed)).toBe(1);
    expect(bestFieldOverlap(fields({ "?x": "1" }), allServed)).toBe(2);
  });
});

describe("nearestUrl", () => {
  it("is the recorded URL sharing the longest beginning", () => {
    expect(
      nearestUrl("https://e.com/shop/cart?x=1", ["https://e.com/", "https://e.com/shop/item", "https://f.com/"]),
    ).toBe("https://e.com/shop/item");
  });
});

describe("fields", () => {
  it("cuts ignored parameters out of the target, the rest kept byte for byte", () => {
    const ignore = new Set(["_", "ts"]);
    expect(targetWithout("/a?x=%41&_=123&y=2&ts=9", ignore)).toBe("/a?x=%41&y=2");
    expect(targetWithout("/a?_=1", ignore)).toBe("/a");
    expect(queryFields("/a?x=1&_=2&x=3", ignore)).toEqual(fieldMap({ x: ["1", "3"] }));
  });
  it("reads form, multipart and JSON bodies as fields, whatever their order or boundary", async () => {
    const none = new Set<string>();
    const form1 = await bodyFields("application/x-www-form-urlencoded", Buffer.from("a=1&b=2"), none);
    const form2 = await bodyFields("application/x-www-form-urlencoded", Buffer.from("b=2&a=1"), none);
    expect(fieldsDigest(form1)).toBe(fieldsDigest(form2));
    const multipart = (boundary: string) =>
      bodyFields(
        `multipart/form-data; boundary=${boundary}`,
        Buffer.from(
          `--${boundary}\r\nContent-Disposition: form-data; name="q"\r\n\r\nshoes\r\n--${boundary}\r\n` +
            `Content-Disposition: form-data; name="f"; filename="a.txt"\r\nContent-Type: text/plain\r\n\r\nhello\r\n--${boundary}--\r\n`,
        ),
        none,
      );
    const [m1, m2] = await Promise.all([
      multipart("----WebKitFormBoundaryAAAA"),
      multipart("----WebKitFormBoundaryBBBB"),
    ]);
    expect(sharedCount(m1, fields({ q: "shoes" }, BODY))).toBe(1);
    expect(fieldsDigest(m1)).toBe(fieldsDigest(m2));
    const json = await bodyFields(
      "application/json",
      Buffer.from('{"b":{"sentAt":5,"x":[1,2]},"a":"k"}'),
      new Set(["sentAt"]),
    );
    expect(json).toEqual(fields({ "b.x[0]": "1", "b.x[1]": "2", a: '"k"' }, BODY));
    const dotted = await bodyFields("text/plain", Buffer.from('{"meta":{"id":1},"id":2}'), new Set(["meta.id"]));
    expect(dotted).toEqual(fields({ id: "2" }, BODY));
  });
});

describe("ReplayIndex: WPR's documented behaviour", () => {
  it("matches fuzzily on the same path when the exact URL was not recorded (TestFindRequestFuzzyMatching)", async () => {
    const index = await indexOf([entry("https://example.com/a/b/c/+/query?usegapi=1&foo=bar&c=d", { body: "r" })]);
    const result = await index.find(request("https://example.com/a/b/c/+/query?usegapi=1&foo=yay&c=d&a=y"), new Set());
    expect(result.kind).toBe("fuzzy");
    expect(bodyOf(result)).toBe("r");
  });

  it("picks the closest query, ties to the smaller URL (TestFindClosest)", async () => {
    const index = await indexOf([
      entry("https://example.com/index.html?a=g&c=e", { body: "u2" }),
      entry("https://example.com/index.html?a=f&c=e", { body: "u1" }),
      entry("https://example.com/index.html?a=b&c=d", { body: "u3" }),
    ]);
    for (let i = 0; i < 3; i++)
      expect(bodyOf(await index.find(request("https://example.com/index.html?c=e"), new Set()))).toBe("u1");
  });

  it("breaks a tie of one URL by the headers that match (TestMatchHeaders)", async () => {
    const headers = {
      Accept: "text/html",
      "Accept-Language": "en-Us,en;q=0.8",
      "Accept-Encoding": "gzip, deflate, br",
    };
    const index = await indexOf([
      entry("https://example.com/mail/", { requestHeaders: { ...headers, Cookie: "FOO=FOO" }, body: "foo" }),
      entry("https://example.com/mail/", { requestHeaders: { ...headers, Cookie: "FOO=BAR;SSID=XX" }, body: "bar" }),
    ]);
    const incoming = Object.entries({ ...headers, Cookie: "FOO=BAR;SSID=XX" }).map(([name, value]) => ({
      name,
      value,
    }));
    expect(bodyOf(await index.find(request("https://example.com/mail/", { headers: incoming }), new Set()))).toBe(
      "bar",
    );
  });

  it("still answers from the URL when no header matches (TestNoHeadersMatch)", async () => {
    const index = await indexOf([
      entry("https://example.com/mail/", { requestHeaders: { "Accept-Encoding": "gzip, deflate, br" }, body: "m" }),
    ]);
    const result = await index.find(
      request("https://example.com/mail/", { headers: [{ name: "Accept-Encoding", value: "gzip, deflate" }] }),
      new Set(),
    );
    expect(result.kind).toBe("exact");
    expect(bodyOf(result)).toBe("m");
  });

  it("serves repeats in recorded order, and from the start in a new episode (TestTieBreakChronologicalOrder)", async () => {
    const index = await indexOf([
      entry("https://example.com/mail/", { requestHeaders: { matched: "1" }, body: "1" }),
      entry("https://example.com/mail/", { requestHeaders: { matched: "2" }, body: "2" }),
    ]);
    const served = new Episode();
    expect(bodyOf(await serve(index, served, request("https://example.com/mail/")))).toBe("1");
    expect(bodyOf(await serve(index, served, request("https://example.com/mail/")))).toBe("2");
    // Where WPR goes back to the first once all were served, the last answer stays (a poll never goes back in time).
    expect(bodyOf(await serve(index, served, request("https://example.com/mail/")))).toBe("2");
    const nextEpisode = new Episode();
    expect(bodyOf(await serve(index, nextEpisode, request("https://example.com/mail/")))).toBe("1");
  });
});

describe("ReplayIndex: the host, method and body rules", () => {
  it("answers a host only from its own exchanges, its default port and case aside", async () => {
    const index = await indexOf([entry("https://shop.example/page", { body: "shop" })]);
    expect(bodyOf(await index.find(request("https://SHOP.example:443/page"), new Set()))).toBe("shop");
    const other = await index.find(request("https://other.example/page"), new Set());
    expect(other).toEqual({ kind: "miss", url: "https://other.example/page", nearest: "https://shop.example/page" });
  });

  it("answers an XHR polled three times with its three recorded answers, then the last (routeFromHAR: the first only)", async () => {
    const index = await indexOf([
      entry("https://shop.example/api/status", { body: '{"n":1}', mimeType: "application/json" }),
      entry("https://shop.example/api/status", { body: '{"n":2}', mimeType: "application/json" }),
      entry("https://shop.example/api/status", { body: '{"n":3}', mimeType: "application/json" }),
    ]);
    const served = new Episode();
    const answers = [];
    for (let i = 0; i < 4; i++)
      answers.push(bodyOf(await serve(index, served, request("https://shop.example/api/status"))));
    expect(answers).toEqual(['{"n":1}', '{"n":2}', '{"n":3}', '{"n":3}']);
  });

  it("answers a poll whose cache-buster changes each time with its recorded answers in order (WPR: the first always)", async () => {
    const index = await indexOf([
      entry("https://shop.example/api/count?t=1709294401000", { body: "1" }),
      entry("https://shop.example/api/count?t=1709294402000", { body: "2" }),
      entry("https://shop.example/api/count?t=1709294403000", { body: "3" }),
    ]);
    const served = new Episode();
    const answers = [];
    for (let i = 0; i < 4; i++)
      answers.push(
        bodyOf(await serve(index, served, request(`https://shop.example/api/count?t=${1800000000000 + i}`))),
      );
    expect(answers).toEqual(["1", "2", "3", "3"]);
  });

  it("keys the method: a POST to a URL recorded for GET alone is not answered with the GET's page", async () => {
    const index = await indexOf([entry("https://shop.example/cart", { body: "cart page" })]);
    const result = await index.find(request("https://shop.example/cart", { method: "POST" }), new Set());
    expect(result.kind).toBe("miss");
  });

  it("keys the body: two forms posted to one URL get their own answers, whatever the fields' order", async () => {
    const form = "application/x-www-form-urlencoded";
    const index = await indexOf([
      entry("https://shop.example/search", {
        method: "POST",
        postData: { mimeType: form, text: "q=shoes&page=1" },
        body: "shoes",
      }),
      entry("https://shop.example/search", {
        method: "POST",
        postData: { mimeType: form, text: "q=hats&page=1" },
        body: "hats",
      }),
    ]);
    const post = (text: string) =>
      request("https://shop.example/search", { method: "POST", bodyText: text, mimeType: form });
    const hats = await index.find(post("page=1&q=hats"), new Set());
    expect([hats.kind, bodyOf(hats)]).toEqual(["exact", "hats"]);
    expect(bodyOf(await index.find(post("q=shoes&page=1"), new Set()))).toBe("shoes");
  });

  it("answers a POST whose body differs in a volatile field from its nearest recording (routeFromHAR: strict)", async () => {
    const json = "application/json";
    const index = await indexOf([
      entry("https://shop.example/api/order", {
        method: "POST",
        postData: { mimeType: json, text: '{"item":7,"qty":1,"nonce":"a1"}' },
        body: "order 7",
      }),
      entry("https://shop.example/api/order", {
        method: "POST",
        postData: { mimeType: json, text: '{"item":9,"qty":2,"nonce":"b2"}' },
        body: "order 9",
      }),
    ]);
    const result = await index.find(
      request("https://shop.example/api/order", {
        method: "POST",
        mimeType: json,
        bodyText: '{"qty":2,"item":9,"nonce":"zz"}',
      }),
      new Set(),
    );
    expect([result.kind, bodyOf(result)]).toEqual(["fuzzy", "order 9"]);
  });

  it("answers exact when the differing fields and parameters are on the ignore lists", async () => {
    const index = await indexOf(
      [
        entry("https://shop.example/api/log?v=2&_=1700000000", {
          method: "POST",
          postData: { mimeType: "application/json", text: '{"event":"view","meta":{"sentAt":1}}' },
          body: "logged",
        }),
      ],
      { ignoreParams: ["_"], ignoreBodyFields: ["sentAt"] },
    );
    const result = await index.find(
      request("https://shop.example/api/log?v=2&_=1800000000", {
        method: "POST",
        mimeType: "application/json",
        bodyText: '{"event":"view","meta":{"sentAt":2}}',
      }),
      new Set(),
    );
    expect(result.kind).toBe("exact");
  });

  it("never reads a POST body as a query (pywb): a form's fields do not match a GET's parameters", async () => {
    const index = await indexOf([
      entry("https://shop.example/find?q=shoes", { body: "GET answer" }),
      entry("https://shop.example/find", {
        method: "POST",
        postData: { mimeType: "application/x-www-form-urlencoded", text: "q=hats" },
        body: "POST answer",
      }),
    ]);
    const post = request("https://shop.example/find", {
      method: "POST",
      mimeType: "application/x-www-form-urlencoded",
      bodyText: "q=shoes",
    });
    const result = await index.find(post, new Set());
    expect([result.kind, bodyOf(result)]).toEqual(["fuzzy", "POST answer"]);
    const get = await index.find(request("https://shop.example/find?q=hats"), new Set());
    expect([get.kind, bodyOf(get)]).toEqual(["fuzzy", "GET answer"]);
  });

  it("answers an unrecorded CORS preflight from the recorded request it asks about, leaving that one unserved", async () => {
    const index = await indexOf([
      entry("https://api.shop.example/cart", {
        method: "POST",
        postData: { mimeType: "application/json", text: '{"item":1}' },
        headers: {
          "Content-Type": "application/json",
          "Access-Control-Allow-Origin": "https://shop.example",
          "Access-Control-Allow-Credentials": "true",
        },
        body: '{"ok":true}',
      }),
      entry("https://api.shop.example/closed", { method: "POST", body: "no CORS" }),
    ]);
    const preflight = (path: string) =>
      request(`https://api.shop.example${path}`, {
        method: "OPTIONS",
        headers: [
          { name: "Origin", value: "https://shop.example" },
          { name: "Access-Control-Request-Method", value: "POST" },
          { name: "Access-Control-Request-Headers", value: "content-type" },
        ],
      });
    const served = new Episode();
    const answer = await serve(index, served, preflight("/cart"));
    expect(answer.kind).toBe("fuzzy");
    if (answer.kind === "miss") return;
    expect([answer.exchange.status, answer.exchange.responseHeaders]).toEqual([
      204,
      [
        { name: "Access-Control-Allow-Origin", value: "https://shop.example" },
        { name: "Access-Control-Allow-Methods", value: "POST" },
        { name: "Vary", value: "Origin" },
        { name: "Access-Control-Allow-Credentials", value: "true" },
        { name: "Access-Control-Allow-Headers", value: "content-type" },
      ],
    ]);
    expect(served.served.size).toBe(0);
    // A request whose recorded answer allowed no origin: the live site would have refused the preflight too.
    expect((await index.find(preflight("/closed"), served.served)).kind).toBe("miss");
  });

  it("answers a request without a validator from the recorded 200, not from a recorded 304", async () => {
    const index = await indexOf([
      entry("https://shop.example/app.js", { status: 304, body: "" }),
      entry("https://shop.example/app.js", { body: "code", mimeType: "text/javascript" }),
    ]);
    expect(bodyOf(await index.find(request("https://shop.example/app.js"), new Set()))).toBe("code");
  });
});

describe("a JSON body's fields, read in one pass", () => {
  /** The fields as JSON.parse and a walk of its tree name them: what the one-pass reading must equal. */
  function parsedFields(text: string, ignore: ReadonlySet<string>): Map<string, string[]> {
    const out = new Map<string, string[]>();
    const walk = (node: unknown, names: string[], label: string) => {
      if (Array.isArray(node)) {
        if (node.length === 0) out.set(label, ["[]"]);
        node.forEach((item, i) => walk(item, names, `${label}[${i}]`));
      } else if (typeof node === "object" && node !== null) {
        const keys = Object.keys(node);
        if (keys.length === 0) out.set(label, ["{}"]);
        for (const key of keys) {
          const path = [...names, key];
          if (ignore.has(key) || ignore.has(path.join("."))) continue;
          walk((node as Record<string, unknown>)[key], path, label === "" ? key : `${label}.${key}`);
        }
      } else out.set(label, [JSON.stringify(node)]);
    };
    walk(JSON.parse(text), [], "");
    return out;
  }

  it("names and values each leaf as a walk of JSON.parse's tree does, escapes, numbers and ignore lists included", async () => {
    const ignore = new Set(["nonce", "meta.sentAt", "a.b.c"]);
    const documents = [
      '{"b":{"sentAt":5,"x":[1,2]},"a":"k"}',
      ' [ 1.0, -0, 1e400, 2E-3, 0.5, -12, true, false, null, "\\u0041\\n\\"", "é" ] ',
      '{"":{"":{"x":[]}},"e":{},"f":[[],[{}]]}',
      '{"nonce":{"deep":[1,2,3]},"meta":{"sentAt":1,"id":2},"a.b":{"c":1},"a":{"b.c":2,"b":{"c":3,"d":4}}}',
      '"just a string"',
      "42",
      '{"list":[{"nonce":1,"v":"x"},{"v":"y"}]}',
    ];
    for (const text of documents)
      expect(await bodyFields("application/json", Buffer.from(text), ignore), text).toEqual(
        fieldSet(parsedFields(text, ignore), BODY),
      );
  });

  it("reads what is not JSON, or nests deeper than it holds, as bytes: one field, their digest", async () => {
    const none = new Set<string>();
    const deep = "[".repeat(2000) + "]".repeat(2000);
    for (const text of ['{"a":1', '{"a":1}x', "[01]", '["\\x"]', "[1,]", '{"a" 1}', "\ufeff[1]", deep]) {
      const digest = createHash("sha256").update(text).digest("base64url");
      expect(await bodyFields("application/json", Buffer.from(text), none), text).toEqual(
        fieldSet(new Map([["", [digest]]]), BODY),
      );
    }
  });
});
