// The entry point's contract (DESIGN "Entry points", docs/contracts.md): a bad MULTIENV_SITE_PROXY_CONFIG is one
// line naming the field and exit status 2; `ca` paths that don't exist yet are generated (key 0600) and kept across
// restarts; the control port serves the log and the CA certificate; relays carry plain TCP (the DevTools path).
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseSiteProxyLog } from "../../src/protocol/site-proxy";
import { configFromEnv } from "../../src/site-proxy/config";
import { cleanup, PROXY_BIN, ROOT, startEchoServer, startProxy, tempDir } from "./helpers";
import * as net from "node:net";

afterAll(cleanup);

function runWith(config: unknown): { status: number | null; stderr: string } {
  const result = spawnSync(process.execPath, [PROXY_BIN], {
    cwd: ROOT,
    env: { ...process.env, MULTIENV_SITE_PROXY_CONFIG: typeof config === "string" ? config : JSON.stringify(config) },
    encoding: "utf8",
    timeout: 20_000,
  });
  return { status: result.status, stderr: result.stderr };
}

const good = { listen: { host: "127.0.0.1", port: 0 }, gateway: "http://gateway:8080", sites: {}, reach: "none", log: "/tmp/never-written.log" };

describe("configuration", () => {
  it("refuses a bad configuration with one line naming the field, and exit status 2", () => {
    const { status, stderr } = runWith({ ...good, reach: "some" });
    expect(status).toBe(2);
    expect(stderr).toBe('multienv-site-proxy: MULTIENV_SITE_PROXY_CONFIG.reach: must be "allow-all", "none" or a list of host names\n');
  });

  const cases: [string, unknown, RegExp][] = [
    ["not set", undefined, /^MULTIENV_SITE_PROXY_CONFIG: is not set/],
    ["not JSON", "{listen:", /^MULTIENV_SITE_PROXY_CONFIG: is not JSON/],
    ["a missing field", { ...good, gateway: undefined }, /^MULTIENV_SITE_PROXY_CONFIG\.gateway: is required$/],
    ["a gateway that is not a URL", { ...good, gateway: "gateway:8080" }, /^MULTIENV_SITE_PROXY_CONFIG\.gateway: must be an http:\/\/ URL/],
    ["a bad port", { ...good, listen: { host: "127.0.0.1", port: 70000 } }, /^MULTIENV_SITE_PROXY_CONFIG\.listen\.port: /],
    ["a bad DNS server", { ...good, dnsServers: ["127.0.0.1"] }, /^MULTIENV_SITE_PROXY_CONFIG\.dnsServers\[0\]: must be "host:port"/],
    ["a static answer that is no address", { ...good, resolve: { "a.test": ["a.test"] } }, /^MULTIENV_SITE_PROXY_CONFIG\.resolve\.a\.test\[0\]: must be an IP address$/],
    ["an unknown field", { ...good, reaches: "none" }, /^MULTIENV_SITE_PROXY_CONFIG: unknown field "reaches"/],
  ];
  for (const [what, config, message] of cases) {
    it(`refuses ${what}, naming the field`, () => {
      const env = config === undefined ? {} : { MULTIENV_SITE_PROXY_CONFIG: typeof config === "string" ? config : JSON.stringify(config) };
      expect(() => configFromEnv(env)).toThrow(message);
    });
  }

  it("fills in the default waits", () => {
    expect(configFromEnv({ MULTIENV_SITE_PROXY_CONFIG: JSON.stringify(good) })).toMatchObject({ connectTimeoutMs: 30_000, idleTimeoutMs: 300_000 });
  });
});

describe("the CA", () => {
  it("generates the CA where `ca` points (key 0600) and keeps it when the proxy starts again", async () => {
    const dir = tempDir();
    const ca = { cert: path.join(dir, "ca/ca.pem"), key: path.join(dir, "ca-private/ca-key.pem") };
    const first = await startProxy({ ca });
    expect(first.caCertPath).toBe(ca.cert);
    expect(fs.statSync(ca.key).mode & 0o777).toBe(0o600);
    const certificate = fs.readFileSync(ca.cert, "utf8");
    expect(certificate).toMatch(/^-----BEGIN CERTIFICATE-----/);
    await first.stop();
    const second = await startProxy({ ca });
    expect(fs.readFileSync(second.caCertPath, "utf8")).toBe(certificate);
  });

  it("without `ca`, writes the generated CA certificate beside the log as ca.pem", async () => {
    const proxy = await startProxy({});
    expect(proxy.caCertPath).toBe(path.join(path.dirname(proxy.logPath), "ca.pem"));
    expect(fs.readFileSync(proxy.caCertPath, "utf8")).toMatch(/BEGIN CERTIFICATE/);
  });
});

describe("control port and relays", () => {
  it("serves the log and the CA certificate on the control port, and relays plain TCP to a relay's target", async () => {
    const echo = await startEchoServer();
    const proxy = await startProxy({
      control: { host: "127.0.0.1", port: 0 },
      relays: [{ listen: { host: "127.0.0.1", port: 0 }, target: `127.0.0.1:${echo.port}` }],
    });
    const control = `http://127.0.0.1:${proxy.startup.control!.port}`;
    const log = await fetch(`${control}/log`);
    expect(log.status).toBe(200);
    expect(parseSiteProxyLog(await log.text())[0]).toMatchObject({ event: "startup", pid: proxy.startup.pid });
    const ca = await fetch(`${control}/ca.pem`);
    expect(await ca.text()).toBe(fs.readFileSync(proxy.caCertPath, "utf8"));
    expect((await fetch(`${control}/other`)).status).toBe(404);

    expect(proxy.startup.relays).toEqual([{ host: "127.0.0.1", port: expect.any(Number), target: `127.0.0.1:${echo.port}` }]);
    const socket = net.connect(proxy.startup.relays[0].port, "127.0.0.1");
    socket.write("through the relay");
    const echoed = await new Promise<string>((resolve) => socket.once("data", (d: Buffer) => resolve(d.toString())));
    expect(echoed).toBe("through the relay");
    socket.destroy();
  });
});
