// The log is the evidence of everything a computer sent: every HTTP/2 stream the proxy takes on gets exactly one
// `request` line, whatever ends it (answered, reset by the computer before or after its answer, cut short of its
// Content-Length), and an upstream request whose stream ended early is aborted at once, never left holding one of
// the computer's gateway connections. Tried with raw frames, the way an adversarial computer would: resets in the
// same write as their HEADERS or a moment later, GET and POST, the proxy's pool cold or warm, a rapid-reset flood
// (CVE-2023-44487), bodies shorter than they declare; a gateway that records what reaches it counts against the log.
import * as http from "node:http";
import type * as net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RequestRecord } from "../../src/protocol/site-proxy";
import { GATEWAY_CONNECTIONS } from "../../src/site-proxy/upstreams";
import {
  DATA,
  END_STREAM,
  frame,
  GOAWAY,
  HEADERS,
  headersFrame,
  openRawH2,
  type RawH2,
  requestFields,
  resetFrame,
  SETTINGS,
} from "./h2-client";
import { cleanup, onCleanup } from "../helpers/processes";
import { type ProxyProcess, startProxy } from "./helpers";
import { sleep, until } from "../helpers/until";
import { listenOnLoopback } from "../helpers/servers";

/** What reached the recording gateway: each request head, and whether its exchange was cut before it ended. */
interface Arrival {
  method: string;
  url: string;
  /** The whole body came. */
  complete: boolean;
  /** The proxy's connection for it closed before the answer ended (the request was aborted). */
  aborted: boolean;
}

const arrivals: Arrival[] = [];
let gatewayUrl: string;

beforeAll(async () => {
  // /slow/ answers after 5 s, /brief/ after 0.3 s, /endless/ sends its head and a first chunk and never ends,
  // anything else at once.
  const server = http.createServer((req, res) => {
    const arrival: Arrival = { method: req.method!, url: req.url!, complete: false, aborted: false };
    arrivals.push(arrival);
    req.on("end", () => (arrival.complete = true));
    res.on("close", () => (arrival.aborted = !res.writableFinished));
    req.resume();
    if (req.url!.includes("/endless/")) {
      res.writeHead(200, { "Content-Type": "text/plain" });
      res.write("first chunk");
    } else if (req.url!.includes("/slow/")) setTimeout(() => res.end("late"), 5_000);
    else if (req.url!.includes("/brief/")) setTimeout(() => res.end("soon"), 300);
    else req.on("end", () => res.end("ok"));
  });
  // An upgrade (a WebSocket) is recorded and never answered.
  server.on("upgrade", (req: http.IncomingMessage, socket: net.Socket) => {
    onCleanup(() => socket.destroy());
    const arrival: Arrival = { method: req.method!, url: req.url!, complete: true, aborted: false };
    arrivals.push(arrival);
    socket.on("error", () => undefined);
    // The proxy's side ending is the abort (an upgraded socket is half-open: it would not close by itself).
    socket.on("end", () => (arrival.aborted = true));
  });
  const port = await listenOnLoopback(server);
  gatewayUrl = `http://127.0.0.1:${port}`;
});
afterAll(cleanup);

const startShopProxy = () => startProxy({ gateway: gatewayUrl, sites: { shop: ["shop.test"] } });
const requestLines = (proxy: ProxyProcess) =>
  proxy.records().filter((r): r is RequestRecord => r.event === "request" && r.host === "shop.test");
const arrivedUnder = (prefix: string) => arrivals.filter((a) => a.url.startsWith(`/website/shop${prefix}`));

/** A stream's request: GET ends with its HEADERS; POST sends a first part of its body and goes on. */
function open(h2: RawH2, stream: number, method: "GET" | "POST", path: string): Buffer[] {
  const fields = requestFields(method, "shop.test", path);
  if (method === "GET") return [headersFrame(stream, fields, true)];
  return [
    headersFrame(stream, [...fields, ["content-type", "text/plain"]], false),
    frame(DATA, 0, stream, Buffer.from("part")),
  ];
}

/** Sends a good GET on `stream` and resolves with its status, or undefined when no answer came within `ms`. */
async function goodGet(h2: RawH2, stream: number, path: string, ms = 10_000): Promise<number | undefined> {
  h2.send(headersFrame(stream, requestFields("GET", "shop.test", path), true));
  const answer = await h2.waitForFrame((f) => f.type === HEADERS && f.stream === stream, ms);
  return answer === undefined ? undefined : answer.payload[0] === 0x88 ? 200 : -1; // 0x88: :status 200, indexed
}

describe("a stream reset right after its HEADERS", () => {
  const STREAMS = 5;
  let warm: ProxyProcess;
  beforeAll(async () => {
    warm = await startShopProxy();
    const h2 = await openRawH2(warm, "shop.test");
    expect(await goodGet(h2, 1, "/warm-up")).toBe(200);
    h2.close();
  });

  for (const pool of ["cold", "warm"] as const)
    for (const method of ["GET", "POST"] as const)
      for (const when of ["in the same write", "a moment later"] as const) {
        it(`gets exactly one request line: ${method}, reset ${when}, the pool ${pool}`, async () => {
          const proxy = pool === "warm" ? warm : await startShopProxy();
          const before = requestLines(proxy).length;
          const prefix = `/slow/reset/${pool}/${method}/${when.replace(/ /g, "-")}/`;
          const h2 = await openRawH2(proxy, "shop.test");
          for (let i = 0; i < STREAMS; i++) {
            const stream = 2 * i + 1;
            const request = open(h2, stream, method, `${prefix}${stream}`);
            if (when === "in the same write") h2.send(...request, resetFrame(stream));
            else {
              // Reset once the head is at the gateway, which answers /slow/ in 5 s: before the answer.
              h2.send(...request);
              await until("the head at the gateway", () => arrivedUnder(prefix).length > i || undefined);
              h2.send(resetFrame(stream));
            }
          }
          const lines = await until(`${STREAMS} request lines`, () =>
            requestLines(proxy).length - before >= STREAMS ? requestLines(proxy).slice(before) : undefined,
          ).catch(() => requestLines(proxy).slice(before));
          await sleep(200); // and no second line for any of them
          expect(requestLines(proxy).length - before).toBe(STREAMS);
          for (const line of lines) expect(line).toMatchObject({ method, endedBy: "stream reset (CANCEL)" });
          expect(lines.every((line) => line.status === undefined)).toBe(true);
          // Whatever reached the gateway was aborted at once, not left waiting for its answer or its body.
          const reached = arrivedUnder(prefix);
          expect(reached.length).toBeLessThanOrEqual(STREAMS);
          if (when === "a moment later") expect(reached).toHaveLength(STREAMS);
          await until(
            "every request reaching the gateway aborted",
            () => reached.every((a) => a.aborted) || undefined,
            5_000,
          );
          h2.close();
        });
      }
});

describe("a stream reset after its answer's head", () => {
  it("keeps its one line, with the status, and the endless answer's upstream request is aborted at once", async () => {
    const proxy = await startShopProxy();
    const h2 = await openRawH2(proxy, "shop.test");
    h2.send(headersFrame(1, requestFields("GET", "shop.test", "/endless/1"), true));
    expect(await h2.waitForFrame((f) => f.type === DATA && f.stream === 1)).toBeDefined();
    h2.send(resetFrame(1));
    const [arrival] = arrivedUnder("/endless/1");
    await until("the endless answer's request aborted", () => arrival.aborted || undefined, 5_000);
    await sleep(200);
    expect(requestLines(proxy)).toEqual([expect.objectContaining({ method: "GET", status: 200 })]);
    h2.close();
  });
});

describe("a rapid-reset flood (HEADERS and RST_STREAM pairs, CVE-2023-44487)", () => {
  it("is ended by GOAWAY, the proxy serves on, and every stream that reached the gateway has its line", async () => {
    const proxy = await startShopProxy();
    const h2 = await openRawH2(proxy, "shop.test");
    // A warm pool, every one of the computer's gateway connections open: a reset stream's head goes out at once.
    const warmUp = Array.from({ length: GATEWAY_CONNECTIONS }, (_, i) => 2 * i + 1);
    for (const stream of warmUp)
      h2.send(headersFrame(stream, requestFields("GET", "shop.test", `/brief/warm/${stream}`), true));
    await until("the warm-up answered", () => requestLines(proxy).length >= GATEWAY_CONNECTIONS || undefined, 10_000);
    const PAIRS = 2_000;
    const first = 2 * GATEWAY_CONNECTIONS + 1;
    for (let batch = 0; batch < PAIRS / 100; batch++) {
      const frames: Buffer[] = [];
      for (let i = 0; i < 100; i++) {
        const stream = first + 2 * (batch * 100 + i);
        frames.push(
          headersFrame(stream, requestFields("GET", "shop.test", `/flood/${stream}`), true),
          resetFrame(stream),
        );
      }
      h2.send(...frames);
    }
    const goaway = await h2.waitForFrame((f) => f.type === GOAWAY, 5_000);
    expect(goaway).toBeDefined();
    await sleep(1_000);
    const reached = arrivedUnder("/flood/").length;
    const lines = requestLines(proxy).slice(GATEWAY_CONNECTIONS);
    expect(lines.length).toBeGreaterThanOrEqual(reached);
    expect(lines.length).toBeLessThanOrEqual(PAIRS);
    expect(lines.every((line) => line.endedBy === "stream reset (CANCEL)")).toBe(true);
    h2.close();
    const again = await openRawH2(proxy, "shop.test");
    expect(await goodGet(again, 1, "/after-the-flood")).toBe(200);
    again.close();
  });
});

describe("a stream whose body is cut short of its Content-Length", () => {
  it(`is aborted upstream at once and logged; after ${GATEWAY_CONNECTIONS + 1} of them a good request is answered promptly`, async () => {
    const proxy = await startShopProxy();
    const h2 = await openRawH2(proxy, "shop.test");
    const SHORT = GATEWAY_CONNECTIONS + 1;
    for (let i = 0; i < SHORT; i++) {
      const stream = 2 * i + 1;
      const fields = requestFields("POST", "shop.test", `/short/${stream}`);
      h2.send(
        headersFrame(stream, [...fields, ["content-length", "10"]], false),
        frame(DATA, END_STREAM, stream, Buffer.from("12345")),
      );
    }
    const started = Date.now();
    expect(await goodGet(h2, 2 * SHORT + 1, "/after-the-short-ones")).toBe(200);
    expect(Date.now() - started).toBeLessThan(10_000); // the idle timeout that held them before is 300 s
    // One line each, the good one's too.
    await until(`${SHORT + 1} request lines`, () => requestLines(proxy).length >= SHORT + 1 || undefined);
    await sleep(200);
    const lines = requestLines(proxy);
    expect(lines).toHaveLength(SHORT + 1);
    expect(lines.filter((line) => line.endedBy === "stream reset (PROTOCOL_ERROR)")).toHaveLength(SHORT);
    const short = arrivedUnder("/short/");
    expect(short.length).toBeLessThanOrEqual(SHORT);
    await until(
      "every short request aborted at the gateway",
      () => short.every((a) => a.aborted && !a.complete) || undefined,
      5_000,
    );
    h2.close();
  });
});

describe("a stream reset while it waits for one of the computer's gateway connections", () => {
  it("has its line at once and never reaches the gateway", async () => {
    const proxy = await startShopProxy();
    const h2 = await openRawH2(proxy, "shop.test");
    // Every gateway connection busy with an answer that never ends (each answered: a line already).
    for (let i = 0; i < GATEWAY_CONNECTIONS; i++)
      h2.send(headersFrame(2 * i + 1, requestFields("GET", "shop.test", `/endless/busy/${i}`), true));
    await until("every connection busy", () => requestLines(proxy).length === GATEWAY_CONNECTIONS || undefined);
    const WAITING = 8;
    const first = 2 * GATEWAY_CONNECTIONS + 1;
    for (let i = 0; i < WAITING; i++) {
      const stream = first + 2 * i;
      h2.send(headersFrame(stream, requestFields("GET", "shop.test", `/waiting/${stream}`), true), resetFrame(stream));
    }
    // No slot ever frees: the waiting ones' lines can come from their resets alone.
    const all = GATEWAY_CONNECTIONS + WAITING;
    await until(`${WAITING} more request lines`, () => requestLines(proxy).length >= all || undefined);
    await sleep(200);
    expect(requestLines(proxy).slice(GATEWAY_CONNECTIONS)).toEqual(
      Array.from({ length: WAITING }, () =>
        expect.objectContaining({ method: "GET", endedBy: "stream reset (CANCEL)" }),
      ),
    );
    expect(requestLines(proxy)).toHaveLength(all);
    expect(arrivedUnder("/waiting/")).toEqual([]);
    h2.close();
  });
});

describe("a WebSocket (extended CONNECT) reset before its answer", () => {
  it("gets exactly one request line saying so, and its upgrade request is aborted at once", async () => {
    const proxy = await startShopProxy();
    const h2 = await openRawH2(proxy, "shop.test");
    // Extended CONNECT is allowed once the proxy's SETTINGS said so.
    await h2.waitForFrame((f) => f.type === SETTINGS && !(f.flags & 1));
    const fields: [string, string][] = [
      [":method", "CONNECT"],
      [":protocol", "websocket"],
      [":scheme", "https"],
      [":authority", "shop.test"],
      [":path", "/socket/1"],
      ["sec-websocket-version", "13"],
    ];
    h2.send(headersFrame(1, fields, false));
    await until("the upgrade at the gateway", () => arrivedUnder("/socket/1")[0]);
    h2.send(resetFrame(1));
    await until("the upgrade request aborted", () => arrivedUnder("/socket/1")[0].aborted || undefined, 5_000);
    await until("its request line", () => requestLines(proxy)[0]);
    await sleep(200);
    expect(requestLines(proxy)).toEqual([
      expect.objectContaining({ method: "CONNECT", endedBy: "stream reset (CANCEL)" }),
    ]);
    expect(requestLines(proxy)[0].status).toBeUndefined();
    h2.close();
  });
});
