import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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
      requestLog: true,
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
      computers: {
        desk: { network: ["pypi.org"], routesSites: true, startTabs: ["https://shop.test/"], headful: false },
      },
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
      requestLog: true,
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
      'multienv:ec2.region: "Virginia" is not an AWS region; write one such as us-east-1',
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
          "config:\n  multienv:websites:\n    gh:\n      live: true\n      domains: [github.com]\n      server: {image: gh-server}\n      secretSettings: {token: githubToken}\n",
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
          "config:\n  multienv:githubToken: ghp_plaintext\n  multienv:websites:\n    gh:\n      live: true\n      domains: [github.com]\n      server: {image: gh-server}\n      secretSettings: {token: githubToken}\n",
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
      "multienv:strayToken: unknown key; the keys here are target, websites, computers, captureTraffic, capture, requestLog, ec2, hosts, kubernetes, selfTest (a secret key belongs here only when a website's secretSettings names it)",
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

describe("what the deploy would refuse, refused in the file", () => {
  const site = (image: string) =>
    `config:\n  multienv:websites:\n    shop:\n      domains: [shop.test]\n      server: {image: "${image}"}\n      frontend: {image: shop-web}\n`;

  it("refuses an image reference outside Docker's grammar, and takes every form Docker does", () => {
    expect(problemLines(stackFile("upper", site("Shop-Server:Latest")))).toEqual([
      'multienv:websites.shop.server.image: "Shop-Server:Latest" is not a Docker image reference (an image name is lower case: shop-server:Latest); write one such as shop-server:latest or registry.example.com/team/shop:1.2',
    ]);
    expect(problemLines(stackFile("space", site("shop server")))[0]).toContain("(it holds a space)");
    expect(problemLines(stackFile("emptyimage", site("")))).toEqual([
      "multienv:websites.shop.server.image: is empty; give an image reference such as shop-server:latest",
    ]);
    for (const good of [
      "shop",
      "shop-server:1.2.3",
      "multienv/sample-shop-server",
      "registry.example.com:5000/team/shop__x.y:v1",
      "localhost/shop",
      `shop@sha256:${"a".repeat(64)}`,
      `Registry.Example.com/team/shop:Latest@sha256:${"0".repeat(64)}`,
    ])
      expect(() => readStackFile(stackFile("goodimage", site(good))), good).not.toThrow();
  });

  /** An ec2 stack file whose ec2 section is a valid one with `fields` (YAML flow values) in place. */
  const ec2 = (fields: Record<string, string>) => {
    const section = {
      region: "us-east-1",
      instanceType: "t3.large",
      runnerCidrs: "[198.18.0.7/32]",
      sshPublicKey: '"ssh-ed25519 AAAA me"',
      ...fields,
    };
    const flow = Object.entries(section)
      .map(([key, value]) => `${key}: ${value}`)
      .join(", ");
    return `config:\n  multienv:target: ec2\n  multienv:ec2: {${flow}}\n  multienv:computers:\n    desk: {network: none}\n`;
  };

  it("refuses a region or instance type AWS does not have (naming a close one), and a lifetime of 0 for what it is", () => {
    expect(
      problemLines(stackFile("aws", ec2({ region: "us-east-7", instanceType: "t3.larg", lifetimeHours: "0" }))),
    ).toEqual([
      'multienv:ec2.region: "us-east-7" is not an AWS region; write one such as us-east-1 (close: us-east-1, us-east-2)',
      'multienv:ec2.instanceType: "t3.larg" is not an EC2 instance type; write one such as t3.large (close: t3.large, c3.large, i3.large)',
      "multienv:ec2.lifetimeHours: must be more than 0: the hours after which the instances stop themselves (default 4)",
    ]);
    expect(() =>
      readStackFile(stackFile("aws", ec2({ region: "eu-central-2", instanceType: "m8g.xlarge" }))),
    ).not.toThrow();
  });

  it("refuses a CIDR past its address's bits, with host bits set, or in an old IPv4 form", () => {
    expect(
      problemLines(
        stackFile("cidr", ec2({ runnerCidrs: "[10.0.0.0/33, 10.0.0.1/8, 10.1/8, 2001:db8::1/129, nonsense]" })),
      ),
    ).toEqual([
      'multienv:ec2.runnerCidrs[0]: "10.0.0.0/33" has a prefix of 33 bits, and an IPv4 address has 32; write at most /32 (/32 is one address)',
      'multienv:ec2.runnerCidrs[1]: "10.0.0.1/8" has host bits set; write the network 10.0.0.0/8, or 10.0.0.1/32 for the one address',
      'multienv:ec2.runnerCidrs[2]: "10.1/8" is not a CIDR; write an address of four numbers and a prefix length such as 203.0.113.7/32',
      'multienv:ec2.runnerCidrs[3]: "2001:db8::1/129" has a prefix of 129 bits, and an IPv6 address has 128; write at most /128 (/128 is one address)',
      'multienv:ec2.runnerCidrs[4]: "nonsense" is not a CIDR; write an address and a prefix length such as 203.0.113.7/32',
    ]);
    expect(() =>
      readStackFile(stackFile("cidr", ec2({ runnerCidrs: "[0.0.0.0/0, 10.0.0.0/8, 2001:db8::/32]" }))),
    ).not.toThrow();
  });

  it("says what selfTest may be when it is none of them", () => {
    expect(
      problemLines(
        stackFile("selftest", 'config:\n  multienv:selfTest: "off"\n  multienv:computers:\n    a: {network: none}\n'),
      ),
    ).toEqual(["multienv:selfTest: must be true, false or {publicUrl: <the page an allow-all computer must reach>}"]);
  });

  it("refuses selfTest.publicUrl with credentials in it, without echoing them", () => {
    const lines = problemLines(
      stackFile(
        "publicurl",
        'config:\n  multienv:selfTest: {publicUrl: "https://alice:hunter2@example.com/"}\n  multienv:computers:\n    a: {network: allow-all}\n',
      ),
    );
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^multienv:selfTest\.publicUrl: holds a user name or password in its URL/);
    expect(lines[0]).not.toMatch(/alice|hunter2|example\.com/);
  });

  it('names an empty value as empty, not as the string ""', () => {
    expect(problemLines(stackFile("emptyvalue", "config:\n  multienv:websites:\n"))).toEqual([
      "multienv:websites: expected a mapping of keys to values, got an empty value",
    ]);
  });

  it("refuses a YAML alias bomb in one line naming the file and the first alias's line", () => {
    const bomb =
      'config:\n  multienv:target: docker\na: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n' +
      "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n";
    const path = stackFile("bomb", bomb);
    expect(problemLines(path)).toEqual([
      `multienv: ${path} line 4: not a stack file: its YAML aliases (*name) expand to a value far larger than the file; write each value out instead of aliasing aliases`,
    ]);
  });
});

describe("the stack files shipped in stacks/", () => {
  it("hold no passphrase salt, so each user's first `multienv up` sets one under their own passphrase", () => {
    // Pulumi writes `encryptionsalt` into a stack file the first time a passphrase meets it; a committed one ties
    // the stack to that passphrase, and every other user's deploy fails with "incorrect passphrase".
    const stacks = join(__dirname, "../../stacks");
    const files = readdirSync(stacks).filter((f) => /^Pulumi\..+\.ya?ml$/.test(f));
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) expect(readFileSync(join(stacks, file), "utf8"), file).not.toMatch(/^encryptionsalt:/m);
  });
});
