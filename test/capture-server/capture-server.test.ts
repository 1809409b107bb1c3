// The capture server over files real tcpdump wrote: its listing, downloads, token, what it refuses, /healthz.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  appendFileSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { captureServerToken, computerControlToken } from "../../src/protocol/auth";
import { PCAP_MEDIA_TYPE, type CaptureServerHealth, type TrafficCaptureListing } from "../../src/protocol/traffic";
import { hostileCaptureFiles, PCAP_HEADER } from "./helpers";
import { rawExchange, request, startUpstream, type Upstream } from "../helpers/servers";
import { spawnService } from "../helpers/processes";
import { TOKEN } from "../gateway/helpers";
import { CAPTURE_SERVER_ARGS, startCaptureServer, startTcpdump, type CaptureServerProcess } from "./helpers";

const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex");
const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

describe("capture server", () => {
  let dir: string;
  let hostileDir: string;
  let site: Upstream;
  let server: CaptureServerProcess;
  let hostile: CaptureServerProcess;
  let hostileNames: string[];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "multienv-capture-server-"));
    hostileDir = mkdtempSync(join(tmpdir(), "multienv-capture-server-hostile-"));
    const payload = Buffer.alloc(256 * 1024, "x");
    site = await startUpstream((_req, res) => res.end(payload));
    const tcpdump = await startTcpdump(join(dir, "shop-server.pcap"), site.port);
    // About 2.5 MB of loopback traffic: tcpdump rotates through its three 1 MB files.
    for (let i = 0; i < 10; i++) {
      await new Promise<void>((resolve, reject) =>
        http
          .get(`${site.url}/page/${i}`, { agent: false }, (res) => res.resume().on("end", resolve))
          .on("error", reject),
      );
      await new Promise((resolve) => setTimeout(resolve, 15));
    }
    await tcpdump.stop();
    writeFileSync(join(dir, "shop-frontend.pcap0"), PCAP_HEADER); // another container's: never listed or served
    writeFileSync(join(dir, "notes.txt"), "not a capture");
    hostileNames = hostileCaptureFiles(hostileDir, "cart-server");
    [server, hostile] = await Promise.all([
      startCaptureServer(dir, "shop-server"),
      startCaptureServer(hostileDir, "cart-server"),
    ]);
  });
  afterAll(async () => {
    await Promise.all([server?.stop(), hostile?.stop()]);
    await site?.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(hostileDir, { recursive: true, force: true });
  });

  it("lists its own container's capture files oldest first, as the gateway lists a captures folder", async () => {
    const answer = await request(`${server.url}/captures`, { headers: bearer(server.token) });
    expect(answer.status).toBe(200);
    expect(answer.headers["content-type"]).toBe("application/json");
    const onDisk = readdirSync(dir)
      .filter((name) => /^shop-server\.pcap\d$/.test(name))
      .map((name) => ({ name, stat: statSync(join(dir, name)) }))
      .sort((a, b) => a.stat.mtimeMs - b.stat.mtimeMs || a.name.localeCompare(b.name));
    expect(onDisk.length).toBe(3);
    expect((JSON.parse(answer.body) as TrafficCaptureListing).captures).toEqual(
      onDisk.map((f) => ({
        name: f.name,
        site: "shop",
        role: "server",
        container: "shop-server",
        run: 1,
        bytes: f.stat.size,
        modified: f.stat.mtime.toISOString(),
      })),
    );
    const head = await request(`${server.url}/captures`, { method: "HEAD", headers: bearer(server.token) });
    expect(head.status).toBe(200);
    expect(head.body).toBe("");
    expect(Number(head.headers["content-length"])).toBe(Buffer.byteLength(answer.body));
  });

  it("streams one capture byte for byte with its length; HEAD gives the head alone", async () => {
    for (const name of ["shop-server.pcap0", "shop-server.pcap1", "shop-server.pcap2"]) {
      const file = readFileSync(join(dir, name));
      const answer = await new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }>(
        (resolve, reject) =>
          http
            .get(`${server.url}/captures/${name}`, { headers: bearer(server.token), agent: false }, (res) => {
              const chunks: Buffer[] = [];
              res.on("data", (chunk: Buffer) => chunks.push(chunk));
              res.on("end", () =>
                resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }),
              );
            })
            .on("error", reject),
      );
      expect(answer.status, name).toBe(200);
      expect(answer.headers["content-type"]).toBe(PCAP_MEDIA_TYPE);
      expect(Number(answer.headers["content-length"])).toBe(file.length);
      expect(sha256(answer.body)).toBe(sha256(file));
    }
    const downloaded = join(tmpdir(), `multienv-capture-server-download-${process.pid}.pcap`);
    const body = await new Promise<Buffer>((resolve, reject) =>
      http
        .get(`${server.url}/captures/shop-server.pcap1`, { headers: bearer(server.token) }, (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("end", () => resolve(Buffer.concat(chunks)));
        })
        .on("error", reject),
    );
    writeFileSync(downloaded, body);
    const read = spawnSync("tcpdump", ["-nn", "-r", downloaded], { encoding: "utf8" });
    rmSync(downloaded, { force: true });
    expect(read.status, read.stderr).toBe(0);
    const head = await request(`${server.url}/captures/shop-server.pcap1`, {
      method: "HEAD",
      headers: bearer(server.token),
    });
    expect(head.status).toBe(200);
    expect(head.body).toBe("");
    expect(Number(head.headers["content-length"])).toBe(statSync(join(dir, "shop-server.pcap1")).size);
  });

  it("logs one line per request, served or refused, never with the token", async () => {
    const before = server.logs.length;
    const served = await request(`${server.url}/captures?log-probe=1`, { headers: bearer(server.token) });
    const refused = await request(`${server.url}/captures?log-probe=2`, {});
    expect([served.status, refused.status]).toEqual([200, 401]);
    await server.waitForLog((l) => l.target === "/captures?log-probe=2");
    const lines = server.logs.slice(before).filter((l) => String(l.target ?? "").includes("log-probe"));
    expect(lines.map((l) => [l.event, l.status, l.target])).toEqual([
      ["request", 200, "/captures?log-probe=1"],
      ["request-refused", 401, "/captures?log-probe=2"],
    ]);
    expect(JSON.stringify(lines)).not.toContain(server.token);
  });

  it("answers 401 to every request without its token, with a wrong one, or with another's", async () => {
    const wrong = [
      undefined,
      "wrong-token-0123456789abcdef0123456789",
      TOKEN, // the control token itself opens no capture server
      captureServerToken(TOKEN, "cart-server"), // another container's
      computerControlToken(TOKEN, "shop-server"), // a computer's of the same name
    ];
    for (const token of wrong) {
      for (const path of ["/captures", "/captures/shop-server.pcap0", "/healthz", "/nothing-here"]) {
        const answer = await request(server.url + path, { headers: token === undefined ? {} : bearer(token) });
        expect(answer.status, `${path} with ${token}`).toBe(401);
        expect(answer.headers["www-authenticate"]).toMatch(/^Bearer /);
        expect(answer.body).not.toContain("pcap");
      }
    }
    const basic = await request(`${server.url}/captures`, {
      headers: { Authorization: `Basic ${Buffer.from(`x:${server.token}`).toString("base64")}` },
    });
    expect(basic.status).toBe(401);
    expect(
      (await request(`${server.url}/captures`, { headers: { Authorization: `bearer ${server.token}` } })).status,
    ).toBe(200);
  });

  it("serves GET and HEAD only", async () => {
    for (const method of ["POST", "PUT", "DELETE", "OPTIONS"]) {
      const answer = await request(`${server.url}/captures`, { method, headers: bearer(server.token), body: "" });
      expect(answer.status, method).toBe(405);
      expect(answer.headers.allow).toBe("GET, HEAD");
    }
  });

  it("neither lists nor serves another container's files, or what is no capture", async () => {
    const listed = (
      JSON.parse(
        (await request(`${server.url}/captures`, { headers: bearer(server.token) })).body,
      ) as TrafficCaptureListing
    ).captures.map((c) => c.name);
    expect(listed).not.toContain("shop-frontend.pcap0");
    expect(listed).not.toContain("notes.txt");
    const other = await request(`${server.url}/captures/shop-frontend.pcap0`, { headers: bearer(server.token) });
    expect(other.status).toBe(404);
    expect((await request(`${server.url}/captures/notes.txt`, { headers: bearer(server.token) })).status).toBe(400);
  });

  it("never follows a FIFO, a link or a directory named like a capture, and stays responsive", async () => {
    const listed = JSON.parse((await request(`${hostile.url}/captures`, { headers: bearer(hostile.token) })).body);
    expect(listed.captures.map((c: { name: string }) => c.name)).toEqual(["cart-server.pcap3"]);
    const started = Date.now();
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        request(`${hostile.url}/captures/${hostileNames[i % hostileNames.length]}`, { headers: bearer(hostile.token) }),
      ),
    );
    for (const answer of answers) expect(answer.status).toBe(404);
    expect(Date.now() - started).toBeLessThan(3_000);
    const real = await request(`${hostile.url}/captures/cart-server.pcap3`, { headers: bearer(hostile.token) });
    expect(real.status).toBe(200);
    expect(Number(real.headers["content-length"])).toBe(124);
    const health = await request(`${hostile.url}/healthz`, { headers: bearer(hostile.token) });
    expect(health.status).toBe(200); // the real file is the newest regular one, just written
  });

  it("refuses request-targets a client would have normalised, on the raw socket", async () => {
    const auth = `Authorization: Bearer ${server.token}\r\n`;
    for (const [path, status] of [
      ["/captures/../x", 400],
      ["/captures/%2e%2e%2fx", 400],
      ["/captures/%2e%2e", 400],
      ["/captures/..%2F..%2Fetc%2Fpasswd", 400],
      ["/captures/..%5Cshop-server.pcap0", 400],
      ["/captures/./shop-server.pcap0", 400],
      ["/captures/shop-server.pcap0/", 400],
      ["/captures/shop-server.pcap0%00.txt", 400],
      ["/captures/%zz", 400],
      ["/x/../captures/shop-server.pcap0", 404],
      ["/healthz/../captures", 404],
      ["*", 400],
      ["http://127.0.0.1/captures", 400],
    ] as const) {
      const response = (
        await rawExchange(server.port, `GET ${path} HTTP/1.1\r\nHost: cs\r\n${auth}Connection: close\r\n\r\n`)
      ).toString("latin1");
      expect(response.split("\r\n")[0], path).toMatch(new RegExp(`^HTTP/1.1 ${status} `));
      expect(response, path).not.toContain("root:");
    }
    const plain = (
      await rawExchange(
        server.port,
        `GET /captures/shop-server.pcap0 HTTP/1.1\r\nHost: cs\r\n${auth}Connection: close\r\n\r\n`,
      )
    ).toString("latin1");
    expect(plain.split("\r\n")[0]).toBe("HTTP/1.1 200 OK");
    const twoHosts = (
      await rawExchange(server.port, `GET /captures HTTP/1.1\r\nHost: a\r\nHost: b\r\n${auth}\r\n`)
    ).toString("latin1");
    expect(twoHosts.split("\r\n")[0]).toMatch(/^HTTP\/1.1 400 /);
  });

  it("exits 2 with one line naming the variable on a bad config or token", async () => {
    const run = (env: Record<string, string>) =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const service = spawnService(CAPTURE_SERVER_ARGS, env);
        let stderr = "";
        service.process.stderr!.on("data", (chunk) => (stderr += chunk));
        service.process.once("exit", (code) => resolve({ code, stderr }));
      });
    const config = JSON.stringify({
      listen: { host: "127.0.0.1", port: 0 },
      capturesDir: dir,
      container: "shop-server",
    });
    const cases: Array<[Record<string, string>, RegExp]> = [
      [
        { MULTIENV_CAPTURE_SERVER_CONFIG: "", MULTIENV_CAPTURE_TOKEN: server.token },
        /MULTIENV_CAPTURE_SERVER_CONFIG: is not set/,
      ],
      [
        { MULTIENV_CAPTURE_SERVER_CONFIG: "{", MULTIENV_CAPTURE_TOKEN: server.token },
        /MULTIENV_CAPTURE_SERVER_CONFIG: is not JSON/,
      ],
      [
        {
          MULTIENV_CAPTURE_SERVER_CONFIG: JSON.stringify({ listen: { port: 1 }, capturesDir: dir, container: "shop" }),
          MULTIENV_CAPTURE_TOKEN: server.token,
        },
        /MULTIENV_CAPTURE_SERVER_CONFIG\.container: /,
      ],
      [
        { MULTIENV_CAPTURE_SERVER_CONFIG: config, MULTIENV_CAPTURE_TOKEN: "short" },
        /MULTIENV_CAPTURE_TOKEN: is shorter than 32/,
      ],
      [{ MULTIENV_CAPTURE_SERVER_CONFIG: config, MULTIENV_CAPTURE_TOKEN: "" }, /MULTIENV_CAPTURE_TOKEN: is not set/],
    ];
    for (const [env, message] of cases) {
      const { code, stderr } = await run(env);
      expect(code).toBe(2);
      expect(stderr).toMatch(message);
      expect(stderr.trim().split("\n")).toHaveLength(1);
      expect(stderr).toMatch(/^multienv-capture-server: /);
    }
  });
});

describe("capture server /healthz", () => {
  let dir: string;
  let server: CaptureServerProcess;
  const health = async (): Promise<{ status: number } & CaptureServerHealth> => {
    const answer = await request(`${server.url}/healthz`, { headers: bearer(server.token) });
    return { status: answer.status, ...(JSON.parse(answer.body) as CaptureServerHealth) };
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "multienv-capture-server-health-"));
    server = await startCaptureServer(dir, "shop-frontend", { captureFreshMs: 60_000 });
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("is 503 naming what is wrong until the capture is a fresh pcap file, then 200", async () => {
    expect(await health()).toEqual({
      status: 503,
      ok: false,
      container: "shop-frontend",
      problem: "no shop-frontend.pcap<N> file in the captures folder",
    });
    writeFileSync(join(dir, "shop-server.pcap0"), PCAP_HEADER); // another container's
    expect((await health()).problem).toBe("no shop-frontend.pcap<N> file in the captures folder");
    writeFileSync(join(dir, "shop-frontend.pcap0"), "");
    expect((await health()).problem).toBe("shop-frontend.pcap0 has no pcap header yet");
    writeFileSync(join(dir, "shop-frontend.pcap0"), Buffer.alloc(64, 7));
    expect((await health()).problem).toBe("shop-frontend.pcap0 is not a pcap file");
    writeFileSync(join(dir, "shop-frontend.pcap0"), PCAP_HEADER);
    expect(await health()).toEqual({ status: 200, ok: true, container: "shop-frontend" });
    expect((await request(`${server.url}/healthz`, { method: "HEAD", headers: bearer(server.token) })).status).toBe(
      200,
    );
  });

  it("is 503 for a stale capture, 200 once it grew since the previous look, and 503 again when it stops", async () => {
    const file = join(dir, "shop-frontend.pcap0");
    const old = new Date(Date.now() - 600_000);
    utimesSync(file, old, old);
    const stale = await health();
    expect(stale.status).toBe(503);
    expect(stale.problem).toMatch(/^shop-frontend\.pcap0 unchanged since .+, even after traffic to its container$/);
    appendFileSync(file, Buffer.alloc(32));
    utimesSync(file, old, old); // grown, its modification time still old
    expect((await health()).status).toBe(200);
    expect((await health()).status).toBe(503); // no growth since that look
  });
});
