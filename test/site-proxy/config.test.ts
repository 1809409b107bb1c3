// The entry point's contract (docs/design.md "Entry points", docs/contracts.md): a bad MULTIENV_SITE_PROXY_CONFIG is
// one line naming the field and exit status 2; `ca` paths that don't exist yet are generated (key 0600) and kept across
// restarts; the control listener's token is refused at start when it could not guard it (control.test.ts has the rest).
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { configFromEnv } from "../../src/site-proxy/config";
import { cleanup, ROOT, spawnService, tempDir } from "../helpers/processes";
import { PROXY_BIN, startProxy } from "./helpers";

afterAll(cleanup);

function runWith(
  config: unknown,
  env: Record<string, string | undefined> = {},
  timeoutMs = 20_000,
): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [PROXY_BIN], {
    cwd: ROOT,
    env: {
      ...process.env,
      MULTIENV_SITE_PROXY_TOKEN: undefined,
      MULTIENV_SITE_PROXY_CONFIG: typeof config === "string" ? config : JSON.stringify(config),
      ...env,
    },
    encoding: "utf8",
    timeout: timeoutMs,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

const good = {
  listen: { host: "127.0.0.1", port: 0 },
  gateway: "http://gateway:8080",
  sites: {},
  reach: "none",
  log: "/tmp/never-written.log",
};

describe("configuration", () => {
  it("refuses a bad configuration with one line naming the field, and exit status 2", () => {
    const { status, stderr } = runWith({ ...good, reach: "some" });
    expect(status).toBe(2);
    expect(stderr).toBe(
      'multienv-site-proxy: MULTIENV_SITE_PROXY_CONFIG.reach: must be "allow-all", "none" or a list of host names\n',
    );
  });

  const cases: [string, unknown, RegExp][] = [
    ["not set", undefined, /^MULTIENV_SITE_PROXY_CONFIG: is not set/],
    ["not JSON", "{listen:", /^MULTIENV_SITE_PROXY_CONFIG: is not JSON/],
    [
      "a missing field",
      { ...good, gateway: undefined },
      /^MULTIENV_SITE_PROXY_CONFIG\.gateway: must be an http:\/\/ URL/,
    ],
    [
      "a gateway that is not a URL",
      { ...good, gateway: "gateway:8080" },
      /^MULTIENV_SITE_PROXY_CONFIG\.gateway: must be an http:\/\/ URL/,
    ],
    [
      "a bad port",
      { ...good, listen: { host: "127.0.0.1", port: 70000 } },
      /^MULTIENV_SITE_PROXY_CONFIG\.listen\.port: /,
    ],
    [
      "a bad DNS server",
      { ...good, dnsServers: ["127.0.0.1"] },
      /^MULTIENV_SITE_PROXY_CONFIG\.dnsServers\[0\]: must be "host:port"/,
    ],
    [
      "a static answer that is no address",
      { ...good, resolve: { "a.test": ["a.test"] } },
      /^MULTIENV_SITE_PROXY_CONFIG\.resolve\["a\.test"\]\[0\]: must be an IP address$/,
    ],
    [
      "an unknown field",
      { ...good, reaches: "none" },
      /^MULTIENV_SITE_PROXY_CONFIG\.reaches: unknown key; did you mean reach\?/,
    ],
    ["relays, which are gone", { ...good, relays: [] }, /^MULTIENV_SITE_PROXY_CONFIG\.relays: unknown key/],
    [
      "a deny entry that is no CIDR",
      { ...good, deny: ["10.0.0.0"] },
      /^MULTIENV_SITE_PROXY_CONFIG\.deny\[0\]: must be a CIDR/,
    ],
    [
      "an allowAddresses entry that is no CIDR",
      { ...good, allowAddresses: ["lo"] },
      /^MULTIENV_SITE_PROXY_CONFIG\.allowAddresses\[0\]: must be a CIDR/,
    ],
    [
      "a control listener without its DevTools relay",
      { ...good, control: { host: "127.0.0.1", port: 0 } },
      /^MULTIENV_SITE_PROXY_CONFIG\.control\.cdp: is required/,
    ],
    [
      "a control cdp that is not host:port",
      { ...good, control: { host: "127.0.0.1", port: 0, cdp: "browser" } },
      /^MULTIENV_SITE_PROXY_CONFIG\.control\.cdp: must be "host:port"/,
    ],
  ];
  for (const [what, config, message] of cases) {
    it(`refuses ${what}, naming the field`, () => {
      const env =
        config === undefined
          ? {}
          : { MULTIENV_SITE_PROXY_CONFIG: typeof config === "string" ? config : JSON.stringify(config) };
      expect(() => configFromEnv(env)).toThrow(message);
    });
  }

  it("names every problem at once, on one line, as the stack config's problems are named", () => {
    const env = {
      MULTIENV_SITE_PROXY_CONFIG: JSON.stringify({
        ...good,
        reach: "some",
        listen: { host: "127.0.0.1", port: 70000 },
        idleTimeout: 5,
      }),
    };
    expect(() => configFromEnv(env)).toThrow(
      /^(?=.*MULTIENV_SITE_PROXY_CONFIG\.reach: )(?=.*MULTIENV_SITE_PROXY_CONFIG\.listen\.port: )(?=.*MULTIENV_SITE_PROXY_CONFIG\.idleTimeout: unknown key; did you mean idleTimeoutMs\?)[^\n]*$/,
    );
  });

  it("fills in the default waits", () => {
    expect(configFromEnv({ MULTIENV_SITE_PROXY_CONFIG: JSON.stringify(good) })).toMatchObject({
      connectTimeoutMs: 30_000,
      idleTimeoutMs: 300_000,
      headTimeoutMs: 30_000,
    });
  });
});

describe("the control token", () => {
  const withControl = { ...good, control: { host: "127.0.0.1", port: 0, cdp: "127.0.0.1:9222" } };
  const tokens: [string, string | undefined, RegExp][] = [
    ["missing", undefined, /: is not set;/],
    ["empty", "", /: is not set;/],
    ["blank", "   \t  ", /: is blank;/],
    ["mostly whitespace", `a${" ".repeat(30)}bcdefghijklmnopqrs`, /: holds characters other than letters/],
    ["padded with whitespace", " 0123456789abcdef0123456789abcdef ", /: holds characters other than letters/],
    ["short", "0123456789abcdef0123456789abcde", /: is shorter than 32 characters;/],
  ];
  for (const [what, token, message] of tokens) {
    it(`refuses a ${what} MULTIENV_SITE_PROXY_TOKEN at start, in one line, exit status 2`, () => {
      const { status, stderr } = runWith(withControl, { MULTIENV_SITE_PROXY_TOKEN: token });
      expect(status).toBe(2);
      expect(stderr.split("\n").filter(Boolean)).toHaveLength(1);
      expect(stderr).toMatch(/^multienv-site-proxy: MULTIENV_SITE_PROXY_TOKEN/);
      expect(stderr).toMatch(message);
    });
  }

  it("needs no token without a control listener", async () => {
    // It starts (its startup line on stdout) and serves; stopped once that line is read.
    const proxy = spawnService([PROXY_BIN], {
      MULTIENV_SITE_PROXY_CONFIG: JSON.stringify({ ...good, log: path.join(tempDir(), "p.log") }),
    });
    try {
      expect(await proxy.waitForLog((line) => line.event === "startup", 60_000)).toMatchObject({ control: null });
    } finally {
      await proxy.stop();
    }
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
