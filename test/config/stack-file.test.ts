import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ConfigError, readStackFile } from "../../src/config";

const dir = mkdtempSync(join(tmpdir(), "multienv-config-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function stackFile(stack: string, yaml: string): string {
  const path = join(dir, `Pulumi.${stack}.yaml`);
  writeFileSync(path, yaml);
  return path;
}

/** The lines a user sees for a refused file. */
function problemLines(path: string): string[] {
  try {
    readStackFile(path);
  } catch (error) {
    if (error instanceof ConfigError) return error.message.split("\n");
    throw error;
  }
  throw new Error(`${path} was accepted`);
}

const good = `
encryptionsalt: v1:abc
config:
  aws:region: us-east-1
  multienv:captureTraffic: true
  multienv:capture:
    fileSizeMb: 5
  multienv:githubToken:
    secure: v1:AAAABBBBCCCC
  multienv:websites:
    shop:
      domains: [shop.test]
      settings: {greeting: hello, limits: {n: 3}}
    github:
      live: true
      domains: [github.com, "*.github.com"]
      allowHosts: ["*.githubassets.com"]
      secretSettings:
        token: githubToken
  multienv:computers:
    desk:
      network: [pypi.org]
      startTabs: ["https://shop.test/"]
`;

describe("readStackFile", () => {
  it("reads a stack file, fills the defaults, and counts a secure: value as a secret without decrypting it", () => {
    const file = readStackFile(stackFile("demo", good));
    expect(file.stack).toBe("demo");
    expect(file.config).toEqual({
      target: "docker",
      captureTraffic: true,
      capture: { fileSizeMb: 5, fileCount: 10 },
      selfTest: true,
      websites: {
        shop: {
          domains: ["shop.test"],
          live: false,
          allowHosts: [],
          server: { port: 8000 },
          settings: { greeting: "hello", limits: { n: 3 } },
          secretSettings: {},
        },
        github: {
          domains: ["github.com", "*.github.com"],
          live: true,
          allowHosts: ["*.githubassets.com"],
          server: { port: 8000 },
          settings: {},
          secretSettings: { token: "githubToken" },
        },
      },
      computers: { desk: { network: ["pypi.org"], routesSites: true, startTabs: ["https://shop.test/"] } },
    });
    expect(file.secrets).toEqual({ githubToken: "[secret]" });
    expect(JSON.stringify(file)).not.toContain("AAAABBBBCCCC");
  });

  it("returns the config map as Pulumi hands it to a program, for running it under mocks", () => {
    const file = readStackFile(stackFile("demo", good));
    expect(file.secretKeys).toEqual(["multienv:githubToken"]);
    expect(file.rawConfig["aws:region"]).toBe("us-east-1");
    expect(file.rawConfig["multienv:captureTraffic"]).toBe("true");
    expect(file.rawConfig["multienv:githubToken"]).toBe("[secret]");
    expect(JSON.parse(file.rawConfig["multienv:computers"])).toEqual({
      desk: { network: ["pypi.org"], startTabs: ["https://shop.test/"] },
    });
  });

  it("accepts a file with no config: section as an empty docker env", () => {
    const file = readStackFile(stackFile("empty", "encryptionsalt: x\n"));
    expect(file.config).toEqual({
      target: "docker",
      websites: {},
      computers: {},
      captureTraffic: false,
      capture: { fileSizeMb: 20, fileCount: 10 },
      selfTest: true,
    });
  });

  it("refuses an unknown key, suggesting the one meant", () => {
    expect(
      problemLines(
        stackFile(
          "typo",
          "config:\n  multienv:captureTrafic: true\n  multienv:websites:\n    shop: {domians: [a.test], domains: []}\n",
        ),
      ),
    ).toEqual([
      "multienv:captureTrafic: unknown key; did you mean captureTraffic? (a secret key belongs here only when a website's secretSettings names it)",
      "multienv:websites.shop.domians: unknown key; did you mean domains?",
    ]);
  });

  it("refuses a value of the wrong type, naming the path and what it expected", () => {
    expect(
      problemLines(
        stackFile(
          "types",
          'config:\n  multienv:websites:\n    shop:\n      domains: shop.test\n      server: {port: "80"}\n  multienv:target: gcp\n  multienv:computers:\n    desk: {network: some}\n',
        ),
      ),
    ).toEqual([
      'multienv:target: expected one of "docker", "ec2", "hosts", "kubernetes"; got "gcp"',
      'multienv:websites.shop.domains: expected a list, got the string "shop.test"',
      'multienv:websites.shop.server.port: expected a number, got the string "80"',
      'multienv:computers.desk.network: must be "allow-all", "none" or a list of host names (an allowlist)',
    ]);
  });

  it("refuses a missing required key", () => {
    expect(
      problemLines(
        stackFile(
          "missing",
          "config:\n  multienv:websites:\n    shop: {live: true}\n  multienv:computers:\n    desk: {}\n",
        ),
      ),
    ).toEqual([
      "multienv:websites.shop.domains: is required (a list)",
      'multienv:computers.desk.network: is required: it must be "allow-all", "none" or a list of host names (an allowlist)',
    ]);
  });

  it("refuses target ec2 without an ec2 section, and checks the section's fields", () => {
    expect(problemLines(stackFile("noec2", "config:\n  multienv:target: ec2\n"))).toEqual([
      "multienv:ec2: is required when target is ec2: set region, instanceType, runnerCidrs and sshPublicKey",
    ]);
    expect(
      problemLines(
        stackFile(
          "badec2",
          "config:\n  multienv:target: ec2\n  multienv:ec2:\n    region: Virginia\n    instanceType: t3.large\n    runnerCidrs: []\n",
        ),
      ),
    ).toEqual([
      "multienv:ec2.region: must be an AWS region such as us-east-1",
      "multienv:ec2.runnerCidrs: needs at least one CIDR: the addresses the runner connects from",
      "multienv:ec2.sshPublicKey: is required (a string)",
    ]);
  });

  it("accepts a complete ec2 section", () => {
    const file = readStackFile(
      stackFile(
        "ec2",
        "config:\n  multienv:target: ec2\n  multienv:ec2:\n    region: us-east-1\n    instanceType: t3.large\n    runnerCidrs: [203.0.113.7/32]\n    sshPublicKey: ssh-ed25519 AAAAC3Nza me@host\n    vpcId: vpc-0abc\n",
      ),
    );
    expect(file.config.ec2).toEqual({
      region: "us-east-1",
      instanceType: "t3.large",
      runnerCidrs: ["203.0.113.7/32"],
      sshPublicKey: "ssh-ed25519 AAAAC3Nza me@host",
      vpcId: "vpc-0abc",
      sshUser: "ec2-user",
      lifetimeHours: 4,
    });
  });

  it("refuses a secret setting whose config key is missing, naming the key and the command that fixes it", () => {
    expect(
      problemLines(
        stackFile(
          "nosecret",
          "config:\n  multienv:websites:\n    gh:\n      live: true\n      domains: [github.com]\n      secretSettings: {token: githubToken}\n",
        ),
      ),
    ).toEqual([
      "multienv:websites.gh.secretSettings.token: names config key githubToken, which is not set; set it with `pulumi config set --secret githubToken <value> --stack nosecret`",
    ]);
  });

  it("refuses a secret setting whose config key holds plaintext", () => {
    expect(
      problemLines(
        stackFile(
          "plain",
          "config:\n  multienv:githubToken: ghp_plaintext\n  multienv:websites:\n    gh:\n      live: true\n      domains: [github.com]\n      secretSettings: {token: githubToken}\n",
        ),
      ),
    ).toEqual([
      "multienv:websites.gh.secretSettings.token: names config key githubToken, which holds a plaintext value; a secret setting must be a secret: `pulumi config set --secret githubToken <value> --stack plain`",
    ]);
  });

  it("refuses a secret inside a structured key, and a secret key no setting names", () => {
    expect(
      problemLines(
        stackFile(
          "nested",
          "config:\n  multienv:strayToken:\n    secure: v1:xyz\n  multienv:websites:\n    gh:\n      domains: [a.test]\n      settings:\n        token:\n          secure: v1:abc\n",
        ),
      ),
    ).toEqual([
      "multienv:websites: holds a secret, so the plan cannot read it; keep websites plaintext and put each secret in its own key named by a website's secretSettings",
      "multienv:strayToken: unknown key; the keys here are target, websites, computers, captureTraffic, capture, ec2, hosts, kubernetes, selfTest (a secret key belongs here only when a website's secretSettings names it)",
    ]);
  });

  it("reports several problems together, schema and secrets at once", () => {
    const lines = problemLines(
      stackFile(
        "several",
        "config:\n  multienv:target: ec2\n  multienv:captureTraffic: maybe\n  multienv:githubToken: plain\n  multienv:websites:\n    gh:\n      live: yes\n      domains: [github.com]\n      secretSettings: {token: githubToken, other: otherToken}\n",
      ),
    );
    expect(lines).toEqual([
      'multienv:websites.gh.live: expected true or false, got the string "yes"',
      'multienv:captureTraffic: expected true or false, got the string "maybe"',
      "multienv:ec2: is required when target is ec2: set region, instanceType, runnerCidrs and sshPublicKey",
      "multienv:websites.gh.secretSettings.other: names config key otherToken, which is not set; set it with `pulumi config set --secret otherToken <value> --stack several`",
      "multienv:websites.gh.secretSettings.token: names config key githubToken, which holds a plaintext value; a secret setting must be a secret: `pulumi config set --secret githubToken <value> --stack several`",
    ]);
  });

  it("refuses a key whose namespace is a typo of multienv, which nothing would read", () => {
    expect(problemLines(stackFile("ns", "config:\n  multenv:websites: {}\n  aws:region: us-east-1\n"))).toEqual([
      'multienv: config key "multenv:websites" is in namespace multenv, which nothing reads; did you mean multienv:websites?',
    ]);
  });

  it("refuses a key without its namespace, as Pulumi does", () => {
    expect(problemLines(stackFile("bare", "config:\n  websites: {}\n"))).toEqual([
      "multienv:websites: a config key needs its namespace; write multienv:websites",
    ]);
  });

  it("names a missing file, and bad YAML with its line, in one line each", () => {
    expect(problemLines(join(dir, "Pulumi.nope.yaml"))).toEqual([
      `multienv: cannot read ${join(dir, "Pulumi.nope.yaml")}: no such file`,
    ]);
    const bad = stackFile("yaml", "config:\n  multienv:websites:\n    shop: {domains: [a.test\n");
    const lines = problemLines(bad);
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(line).toMatch(new RegExp(`^multienv: ${bad} line \\d+: not valid YAML: `));
  });
});
