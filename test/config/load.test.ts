// loadStackConfig inside a Pulumi program: config and secrets as the Pulumi runtime holds them (under mocks).
import * as pulumi from "@pulumi/pulumi";
import { beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadStackConfig } from "../../src/config";

beforeAll(() => {
  pulumi.runtime.setMocks(
    {
      newResource: (args) => ({ id: `${args.name}-id`, state: args.inputs }),
      call: (args) => args.inputs,
    },
    "multienv",
    "demo",
  );
});

const websites = {
  shop: { domains: ["shop.test"], server: { image: "shop-server" }, frontend: { image: "shop-frontend" } },
  gh: { live: true, domains: ["github.com"], server: { image: "gh-server" }, secretSettings: { token: "githubToken" } },
};

/** Sets the stack's config the way the Pulumi engine passes it: strings, structured values as JSON. */
function setConfig(values: Record<string, unknown>, secretKeys: string[] = []): void {
  const config: Record<string, string> = {};
  for (const [key, value] of Object.entries(values))
    config[`multienv:${key}`] = typeof value === "string" ? value : JSON.stringify(value);
  config["aws:region"] = "us-east-1";
  pulumi.runtime.setAllConfig(
    config,
    secretKeys.map((k) => `multienv:${k}`),
  );
}

function unwrap<T>(output: pulumi.Output<T>): Promise<T> {
  return new Promise((resolve) => output.apply((v) => resolve(v)));
}

function problemLines(): string[] {
  try {
    loadStackConfig();
  } catch (error) {
    if (error instanceof ConfigError) return error.message.split("\n");
    throw error;
  }
  throw new Error("the config was accepted");
}

describe("loadStackConfig", () => {
  it("reads and validates the multienv namespace, and returns each named secret as a Pulumi secret", async () => {
    setConfig({ websites, captureTraffic: "true", githubToken: "ghp_real" }, ["githubToken"]);
    const { config, secrets } = loadStackConfig();
    expect(config.captureTraffic).toBe(true);
    expect(config.target).toBe("docker");
    expect(config.websites.gh.secretSettings).toEqual({ token: "githubToken" });
    expect(Object.keys(secrets)).toEqual(["githubToken"]);
    expect(await pulumi.isSecret(secrets.githubToken)).toBe(true);
    expect(await unwrap(secrets.githubToken)).toBe("ghp_real");
    expect(JSON.stringify(config)).not.toContain("ghp_real");
  });

  it("refuses a secret setting whose key holds plaintext, naming the key and the fix", () => {
    setConfig({ websites, githubToken: "ghp_real" });
    expect(problemLines()).toEqual([
      "multienv:websites.gh.secretSettings.token: names config key githubToken, which holds a plaintext value; a secret setting must be a secret: `pulumi config set --secret githubToken <value> --stack demo`",
    ]);
  });

  it("refuses a secret setting whose key is missing", () => {
    setConfig({ websites });
    expect(problemLines()).toEqual([
      "multienv:websites.gh.secretSettings.token: names config key githubToken, which is not set; set it with `pulumi config set --secret githubToken <value> --stack demo`",
    ]);
  });

  it("reports every problem at once as one ConfigError", () => {
    setConfig({ websites: { shop: { domains: "shop.test", colour: "red" } }, target: "ec2", captureTrafic: "true" });
    expect(problemLines()).toEqual([
      "multienv:captureTrafic: unknown key; did you mean captureTraffic? (a secret key belongs here only when a website's secretSettings names it)",
      'multienv:websites.shop.domains: expected a list, got the string "shop.test"',
      "multienv:websites.shop.colour: unknown key; the keys here are domains, live, allowHosts, server, frontend, replay, settings, secretSettings, record, keepCredentials, recordTrust, accountPool",
      "multienv:ec2: is required when target is ec2: set region, instanceType, runnerCidrs and sshPublicKey",
    ]);
  });

  it("names the key that took a renamed key's place", () => {
    setConfig({ websites: { gh: { live: true, domains: ["github.com"], record: true, keepCookies: true } } });
    expect(problemLines()).toEqual([
      "multienv:websites.gh.keepCookies: unknown key; it is now keepCredentials, which keeps a recorded site's cookies and its other credentials (Authorization and the like)",
    ]);
  });

  it("a ConfigError carries its problems as data", () => {
    setConfig({ target: "gcp" });
    try {
      loadStackConfig();
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems).toEqual([
        { path: "target", message: 'expected one of "docker", "ec2", "hosts", "kubernetes"; got "gcp"' },
      ]);
    }
  });
});

describe("loadStackConfig, whole-config checks", () => {
  it("refuses a key in a namespace that looks like a typo of multienv", () => {
    pulumi.runtime.setAllConfig({ "multenv:websites": "{}", "aws:region": "us-east-1" }, []);
    expect(problemLines()).toEqual([
      'multienv: config key "multenv:websites" is in namespace multenv, which nothing reads; did you mean multienv:websites?',
    ]);
  });

  it("refuses a secret setting that names a stack key", () => {
    setConfig({
      websites: {
        gh: {
          live: true,
          domains: ["github.com"],
          server: { image: "gh-server" },
          secretSettings: { token: "target" },
        },
      },
    });
    expect(problemLines()).toEqual([
      'multienv:websites.gh.secretSettings.token: names "target", a stack key, not a secret; name a key of its own, set with `pulumi config set --secret tokenSecret <value> --stack demo`',
    ]);
  });

  it("accepts an empty config as an empty docker env", () => {
    pulumi.runtime.setAllConfig({}, []);
    expect(loadStackConfig()).toEqual({
      config: {
        target: "docker",
        websites: {},
        computers: {},
        captureTraffic: false,
        capture: { fileSizeMb: 20, fileCount: 10 },
        requestLog: true,
        selfTest: true,
      },
      secrets: {},
    });
  });
});
