// `multienv sweep` against a fake EC2 Query API on loopback: the real client (SigV4 headers, form-encoded
// actions, XML answers with pages), the real CLI process, and an EC2 that refuses what the real one refuses
// (a group still held by an instance that is shutting down, or named in another group's rule).
import { execFile } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { parseXml, queryEc2Api, signedHeaders, signingKey } from "../../src/runner/targets/ec2/ec2-api";
import { formatAge, parseAge, sweep } from "../../src/runner/targets/ec2/sweep";
import { CLI } from "./helpers";
import { ROOT } from "../helpers/processes";

const HOUR = 3_600_000;
const CREDENTIALS = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" };

interface FakeInstance {
  id: string;
  state: string;
  launchTime: Date;
  tags: Record<string, string>;
  groups: string[];
  /** Describe calls left before a shutting-down instance is terminated. */
  endsIn?: number;
}

/** An in-memory EC2 that answers the Query protocol as AWS does, for the calls the sweep makes. */
class FakeEc2 {
  instances: FakeInstance[] = [];
  groups: { id: string; name: string; tags: Record<string, string> }[] = [];
  rules: { id: string; groupId: string; egress: boolean; peer?: string }[] = [];
  keys: { id: string; name: string; createTime: Date; tags: Record<string, string> }[] = [];
  calls: string[] = [];
  unsigned = 0;
  server!: http.Server;
  url = "";

  async start(): Promise<void> {
    this.server = http.createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        const auth = req.headers.authorization ?? "";
        if (
          !/^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/\d{8}\/eu-west-1\/ec2\/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=[0-9a-f]{64}$/.test(
            auth,
          )
        )
          this.unsigned++;
        const params = new URLSearchParams(body);
        try {
          const xml = this.answer(params.get("Action") ?? "", params);
          res.writeHead(200, { "content-type": "text/xml" }).end(`<?xml version="1.0" encoding="UTF-8"?>\n${xml}`);
        } catch (error) {
          const [code, message] = (error as Error).message.split(": ");
          res
            .writeHead(400, { "content-type": "text/xml" })
            .end(
              `<?xml version="1.0"?><Response><Errors><Error><Code>${code}</Code><Message>${message}</Message></Error></Errors></Response>`,
            );
        }
      });
    });
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/`;
  }

  private list(params: URLSearchParams, prefix: string): string[] {
    return [...params.entries()].filter(([k]) => k.startsWith(`${prefix}.`)).map(([, v]) => v);
  }

  private answer(action: string, params: URLSearchParams): string {
    this.calls.push(action);
    const tags = (t: Record<string, string>) =>
      `<tagSet>${Object.entries(t)
        .map(([k, v]) => `<item><key>${k}</key><value>${v.replace(/&/g, "&amp;")}</value></item>`)
        .join("")}</tagSet>`;
    const tagged = (t: Record<string, string>) =>
      params.get("Filter.1.Name") !== "tag-key" || params.get("Filter.1.Value.1")! in t;
    switch (action) {
      case "DescribeInstances": {
        for (const i of this.instances) if (i.state === "shutting-down" && --i.endsIn! <= 0) i.state = "terminated";
        // Two pages, one reservation each, as AWS pages a long answer.
        const matching = this.instances.filter((i) => tagged(i.tags));
        const start = params.get("NextToken") === "page2" ? 1 : 0;
        const page = start === 0 ? matching.slice(0, 1) : matching.slice(1);
        const next = start === 0 && matching.length > 1 ? "<nextToken>page2</nextToken>" : "";
        const reservations = page.map(
          (i) =>
            `<item><reservationId>r-${i.id}</reservationId><instancesSet><item><instanceId>${i.id}</instanceId><instanceState><code>16</code><name>${i.state}</name></instanceState><launchTime>${i.launchTime.toISOString()}</launchTime>${tags(i.tags)}</item></instancesSet></item>`,
        );
        return `<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>x</requestId><reservationSet>${reservations.join("")}</reservationSet>${next}</DescribeInstancesResponse>`;
      }
      case "TerminateInstances":
        for (const id of this.list(params, "InstanceId")) {
          const i = this.instances.find((x) => x.id === id);
          if (!i) throw new Error(`InvalidInstanceID.NotFound: ${id}`);
          i.state = "shutting-down";
          i.endsIn = 2;
        }
        return "<TerminateInstancesResponse><instancesSet/></TerminateInstancesResponse>";
      case "DescribeSecurityGroups":
        return `<DescribeSecurityGroupsResponse><securityGroupInfo>${this.groups
          .filter((g) => tagged(g.tags))
          .map((g) => `<item><groupId>${g.id}</groupId><groupName>${g.name}</groupName>${tags(g.tags)}</item>`)
          .join("")}</securityGroupInfo></DescribeSecurityGroupsResponse>`;
      case "DescribeSecurityGroupRules": {
        const ids = this.list(params, "Filter.1.Value");
        return `<DescribeSecurityGroupRulesResponse><securityGroupRuleSet>${this.rules
          .filter((r) => ids.includes(r.groupId))
          .map(
            (r) =>
              `<item><securityGroupRuleId>${r.id}</securityGroupRuleId><groupId>${r.groupId}</groupId><isEgress>${r.egress}</isEgress></item>`,
          )
          .join("")}</securityGroupRuleSet></DescribeSecurityGroupRulesResponse>`;
      }
      case "RevokeSecurityGroupIngress":
      case "RevokeSecurityGroupEgress": {
        const ids = this.list(params, "SecurityGroupRuleId");
        this.rules = this.rules.filter(
          (r) =>
            !(
              ids.includes(r.id) &&
              r.groupId === params.get("GroupId") &&
              r.egress === (action === "RevokeSecurityGroupEgress")
            ),
        );
        return "<RevokeResponse><return>true</return></RevokeResponse>";
      }
      case "DeleteSecurityGroup": {
        const id = params.get("GroupId")!;
        if (this.instances.some((i) => i.state !== "terminated" && i.groups.includes(id)))
          throw new Error(`DependencyViolation: resource ${id} has a dependent object`);
        if (this.rules.some((r) => r.peer === id))
          throw new Error(`DependencyViolation: resource ${id} has a dependent object`);
        this.groups = this.groups.filter((g) => g.id !== id);
        this.rules = this.rules.filter((r) => r.groupId !== id);
        return "<DeleteSecurityGroupResponse><return>true</return></DeleteSecurityGroupResponse>";
      }
      case "DescribeKeyPairs":
        return `<DescribeKeyPairsResponse><keySet>${this.keys
          .filter((k) => tagged(k.tags))
          .map(
            (k) =>
              `<item><keyPairId>${k.id}</keyPairId><keyName>${k.name}</keyName><createTime>${k.createTime.toISOString()}</createTime>${tags(k.tags)}</item>`,
          )
          .join("")}</keySet></DescribeKeyPairsResponse>`;
      case "DeleteKeyPair":
        this.keys = this.keys.filter((k) => k.id !== params.get("KeyPairId"));
        return "<DeleteKeyPairResponse><return>true</return></DeleteKeyPairResponse>";
      default:
        throw new Error(`InvalidAction: ${action}`);
    }
  }

  /** A stack as an ec2 deploy leaves it: an env VM and a computer VM, their groups naming each other, key pairs. */
  addStack(stack: string, age: number, now: Date): void {
    const when = new Date(now.getTime() - age);
    const t = (name: string) => ({ Name: name, "multienv:stack": stack, "multienv:task": stack });
    this.groups.push(
      { id: `sg-${stack}-env`, name: `${stack}-env-sg`, tags: t(`${stack}-env-sg`) },
      { id: `sg-${stack}-pc`, name: `${stack}-pc-sg`, tags: t(`${stack}-pc-sg`) },
    );
    this.rules.push(
      { id: `sgr-${stack}-1`, groupId: `sg-${stack}-env`, egress: true, peer: `sg-${stack}-pc` },
      { id: `sgr-${stack}-2`, groupId: `sg-${stack}-pc`, egress: false, peer: `sg-${stack}-env` },
      { id: `sgr-${stack}-3`, groupId: `sg-${stack}-env`, egress: false },
    );
    this.instances.push(
      {
        id: `i-${stack}-env`,
        state: "running",
        launchTime: when,
        tags: t(`${stack}-env-vm`),
        groups: [`sg-${stack}-env`],
      },
      {
        id: `i-${stack}-pc`,
        state: "running",
        launchTime: when,
        tags: t(`${stack}-pc-vm`),
        groups: [`sg-${stack}-pc`],
      },
    );
    this.keys.push({ id: `key-${stack}-env`, name: `${stack}-env-key`, createTime: when, tags: t(`${stack}-env-key`) });
  }
}

const NOW = new Date("2026-12-01T12:00:00Z");
let ec2: FakeEc2;

beforeAll(async () => {
  ec2 = new FakeEc2();
  await ec2.start();
});
afterAll(() => ec2.server.close());
beforeEach(() => {
  Object.assign(ec2, { instances: [], groups: [], rules: [], keys: [], calls: [], unsigned: 0 });
  ec2.addStack("old", 30 * HOUR, NOW);
  ec2.addStack("fresh", 1 * HOUR, NOW);
  // Someone else's instance, not tagged by multienv: never touched.
  ec2.instances.push({
    id: "i-theirs",
    state: "running",
    launchTime: new Date(0),
    tags: { Name: "prod" },
    groups: ["sg-prod"],
  });
});

const api = () => queryEc2Api({ region: "eu-west-1", credentials: CREDENTIALS, endpoint: ec2.url });

describe("sweep", () => {
  it("lists only what multienv tagged past the age, and changes nothing without yes", async () => {
    const lines: string[] = [];
    const report = await sweep({ api: api(), olderThanMs: 4 * HOUR, yes: false, now: NOW, log: (l) => lines.push(l) });
    expect(report.instances.map((i) => i.id).sort()).toEqual(["i-old-env", "i-old-pc"]);
    expect(report.groups.map((g) => g.id).sort()).toEqual(["sg-old-env", "sg-old-pc"]);
    expect(report.keyPairs.map((k) => k.name)).toEqual(["old-env-key"]);
    expect(report.swept).toBe(false);
    expect(lines).toContain("instance i-old-env (old-env-vm) stack old: running, launched 1d6h ago");
    expect(ec2.calls.filter((c) => !c.startsWith("Describe"))).toEqual([]);
    expect(ec2.unsigned).toBe(0);
  });

  it("with yes terminates the instances, waits for them to end, empties the groups that name each other, deletes groups and key pairs", async () => {
    const report = await sweep({ api: api(), olderThanMs: 4 * HOUR, yes: true, now: NOW, pollMs: 1 });
    expect(report.swept).toBe(true);
    expect(ec2.instances.filter((i) => i.id.startsWith("i-old")).map((i) => i.state)).toEqual([
      "terminated",
      "terminated",
    ]);
    expect(ec2.groups.map((g) => g.id)).toEqual(["sg-fresh-env", "sg-fresh-pc"]);
    expect(ec2.keys.map((k) => k.name)).toEqual(["fresh-env-key"]);
    expect(ec2.instances.find((i) => i.id === "i-theirs")!.state).toBe("running");
    expect(ec2.instances.filter((i) => i.id.startsWith("i-fresh")).map((i) => i.state)).toEqual(["running", "running"]);
    // Every group deletion came after the instances were gone and after the rules were revoked.
    const firstDelete = ec2.calls.indexOf("DeleteSecurityGroup");
    expect(ec2.calls.lastIndexOf("RevokeSecurityGroupEgress")).toBeLessThan(firstDelete);
    expect(ec2.calls.indexOf("TerminateInstances")).toBeLessThan(firstDelete);
  });

  it("keeps a stale stack's groups while one of its instances is younger (a group in use cannot go)", async () => {
    ec2.instances.push({
      id: "i-old-new",
      state: "running",
      launchTime: NOW,
      tags: { "multienv:stack": "old" },
      groups: ["sg-old-pc"],
    });
    const report = await sweep({ api: api(), olderThanMs: 4 * HOUR, yes: false, now: NOW });
    expect(report.groups).toEqual([]);
    expect(report.instances.map((i) => i.id).sort()).toEqual(["i-old-env", "i-old-pc"]);
  });

  it("reports EC2's refusal by its code and message", async () => {
    const broken = {
      ...api(),
      terminate: () =>
        queryEc2Api({ region: "eu-west-1", credentials: CREDENTIALS, endpoint: ec2.url }).terminate(["i-nope"]),
    };
    await expect(sweep({ api: broken, olderThanMs: 4 * HOUR, yes: true, now: NOW, pollMs: 1 })).rejects.toThrow(
      "EC2 TerminateInstances failed (400): InvalidInstanceID.NotFound: i-nope",
    );
  });
});

describe("sweep's pieces", () => {
  it("reads ages as people write them, and refuses others naming the option", () => {
    expect(parseAge("4h")).toBe(4 * HOUR);
    expect(parseAge("1d12h")).toBe(36 * HOUR);
    expect(parseAge("90m")).toBe(1.5 * HOUR);
    expect(parseAge("1w")).toBe(168 * HOUR);
    expect(() => parseAge("4 hours")).toThrow('--older-than "4 hours": expected an age such as 90m, 4h, 2d or 1d12h');
    expect(() => parseAge("")).toThrow(/--older-than/);
    expect(formatAge(30 * HOUR)).toBe("1d6h");
    expect(formatAge(HOUR + 120_000)).toBe("1h2m");
  });

  it("signs as AWS's own SigV4 example does (the documented signing key and scope)", () => {
    // AWS's documented example: this secret, 20150830, us-east-1, iam.
    expect(signingKey(CREDENTIALS.secretAccessKey, "20150830", "us-east-1", "iam").toString("hex")).toBe(
      "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9",
    );
    const url = new URL("https://ec2.us-east-1.amazonaws.com/");
    const headers = signedHeaders(
      url,
      "Action=DescribeRegions&Version=2016-11-15",
      "us-east-1",
      CREDENTIALS,
      new Date("2015-08-30T12:36:00Z"),
    );
    expect(headers["x-amz-date"]).toBe("20150830T123600Z");
    expect(headers.authorization).toMatch(
      /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/20150830\/us-east-1\/ec2\/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=[0-9a-f]{64}$/,
    );
    // Any change of the body changes the signature.
    const other = signedHeaders(
      url,
      "Action=DescribeRegions&Version=2016-11-16",
      "us-east-1",
      CREDENTIALS,
      new Date("2015-08-30T12:36:00Z"),
    );
    expect(other.authorization).not.toBe(headers.authorization);
    expect(signedHeaders(url, "", "us-east-1", { ...CREDENTIALS, sessionToken: "tok" })["x-amz-security-token"]).toBe(
      "tok",
    );
  });

  it("parses XML with entities, self-closing elements and a declaration", () => {
    const root = parseXml('<?xml version="1.0"?><a><b>x &amp; y &#65;</b><c/><d><e>1</e></d></a>');
    expect(root.children[0].children.map((c) => [c.name, c.text])).toEqual([
      ["b", "x & y A"],
      ["c", ""],
      ["d", ""],
    ]);
    expect(() => parseXml("<a><b></a>")).toThrow(/malformed XML/);
  });
});

describe("multienv sweep (the CLI)", () => {
  const run = (args: string[], env: NodeJS.ProcessEnv) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [CLI, "sweep", ...args],
        { cwd: ROOT, env: { PATH: process.env.PATH, ...env }, timeout: 30_000 },
        (error, stdout, stderr) =>
          resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
  const creds = { AWS_ACCESS_KEY_ID: CREDENTIALS.accessKeyId, AWS_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey };

  it("lists, then removes with --yes, through the real process", async () => {
    // The CLI reads the clock: stacks 30 h and 1 h old as of now.
    Object.assign(ec2, { instances: [], groups: [], rules: [], keys: [] });
    ec2.addStack("old", 30 * HOUR, new Date());
    ec2.addStack("fresh", 1 * HOUR, new Date());
    const threshold = "4h";
    const listed = await run(["--older-than", threshold, "--region", "eu-west-1", "--endpoint", ec2.url], creds);
    expect(listed.stderr).toBe("");
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain("instance i-old-env (old-env-vm) stack old: running");
    expect(listed.stdout).toContain("5 resource(s) past");
    expect(listed.stdout).toContain("run again with --yes to remove them");
    expect(listed.stdout).not.toContain("fresh");
    const swept = await run(
      ["--older-than", threshold, "--region", "eu-west-1", "--endpoint", ec2.url, "--yes"],
      creds,
    );
    expect(swept.code).toBe(0);
    expect(swept.stdout).toContain("swept: 2 instance(s) terminated, 2 security group(s) and 1 key pair(s) deleted");
  }, 40_000);

  it("says which credentials, region or age are missing, in one line", async () => {
    expect((await run(["--older-than", "4h", "--region", "eu-west-1"], {})).stderr).toBe(
      "multienv sweep: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones) in the environment\n",
    );
    expect((await run(["--older-than", "4h"], creds)).stderr).toBe(
      "multienv sweep: no region: pass --region (e.g. --region us-east-1) or set AWS_REGION\n",
    );
    expect((await run(["--older-than", "soon", "--region", "x"], creds)).stderr).toMatch(
      /^multienv sweep: --older-than "soon": expected an age/,
    );
    expect((await run([], creds)).stderr).toMatch(/required option '--older-than <age>' not specified/);
  }, 40_000);
});
