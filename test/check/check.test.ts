// `multienv check` as a user runs it: the real bin, a real process, exit code and output.
import { execFile } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(__dirname, "..", "..");
const BIN = join(ROOT, "bin", "multienv.js");

function check(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(process.execPath, [BIN, "check", ...args], { cwd: ROOT, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
      done({ code, stdout, stderr });
    });
  });
}

const dir = mkdtempSync(join(tmpdir(), "multienv-check-"));
function stackFile(name: string, yaml: string): string {
  const path = join(dir, `Pulumi.${name}.yaml`);
  writeFileSync(path, yaml);
  return path;
}

const NO_STACK_TRACE = /^\s+at .+:\d+:\d+\)?$/m;

describe.concurrent("multienv check", () => {
  it("passes the demo stack and prints its resource graph, outputs and no secret", async () => {
    const { code, stdout, stderr } = await check("demo");
    expect(stderr).not.toMatch(NO_STACK_TRACE);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^multienv check demo: ok, \d+ resources/);
    expect(stdout).toContain("multienv:index:MultiEnv demo");
    expect(stdout).toMatch(
      /docker:index\/container:Container demo-shop-server-capture \[provider demo-engine-provider\] .*networkMode=container:demo-shop-server-id capAdd=CAP_NET_RAW,CAP_NET_ADMIN/,
    );
    expect(stdout).toMatch(
      /docker:index\/container:Container demo-gateway \[provider demo-engine-provider\] .*ports=127\.0\.0\.1:auto->8080 capDrop=CAP_NET_RAW mounts=demo-captures:\/captures:ro env=\[secret\] healthcheck wait/,
    );
    // The local engine's provider, shown with no host: DOCKER_HOST or the default socket.
    expect(stdout).toMatch(/^ +pulumi:providers:docker demo-engine-provider$/m);
    expect(stdout).toContain('controlToken: "[secret]"');
    expect(stdout).toContain('gatewayUrl: "http://127.0.0.1:<port chosen by Docker>"');
  });

  it("passes the github-live stack; --json prints {ok, problems, warnings, resources, outputs} with secrets masked", async () => {
    const { code, stdout } = await check("github-live", "--json");
    expect(code).toBe(0);
    const result = JSON.parse(stdout);
    expect(Object.keys(result)).toEqual(["ok", "problems", "warnings", "resources", "outputs"]);
    expect(result.ok).toBe(true);
    expect(result.problems).toEqual([]);
    for (const r of result.resources)
      expect(Object.keys(r)).toEqual(expect.arrayContaining(["type", "name", "parent", "inputs"]));
    const server = result.resources.find(
      (r: { name: string; type: string }) =>
        r.name === "github-live-github-server" && r.type === "docker:index/container:Container",
    );
    expect(server.inputs.envs).toBe("[secret]");
    expect(server.parent).toBe("github-live-github");
    // On the env VM's engine: its provider reaches it over SSH.
    expect(server.provider).toBe("github-live-env-engine-provider");
    const provider = result.resources.find(
      (r: { name: string; type: string }) =>
        r.name === "github-live-env-engine-provider" && r.type === "pulumi:providers:docker",
    );
    expect(provider.inputs.host).toBe("ssh://ec2-user@<public IP of github-live-env-vm>:22");
    expect(result.outputs.controlToken).toBe("[secret]");
    expect(result.outputs.liveWebsites).toEqual([
      {
        name: "github",
        domains: ["github.com", "*.github.com"],
        allowHosts: ["*.githubassets.com", "*.githubusercontent.com"],
        reproducible: false,
      },
    ]);
    expect(result.outputs.reproducible).toBe(false);
    expect(stdout).not.toContain("PLACEHOLDER");
    // The example's placeholders pass, each with a warning naming it.
    expect(result.warnings).toEqual([
      expect.stringMatching(
        /^multienv:ec2\.runnerCidrs\[0\]: 203\.0\.113\.7\/32 is in a range set aside for documentation/,
      ),
      expect.stringMatching(/^multienv:ec2\.sshPublicKey: holds no usable key \(a placeholder\?\)/),
    ]);
    expect(result.resources.filter((r: { type: string }) => r.type === "aws:ec2/instance:Instance")).toHaveLength(2);
  });

  it("takes a path to a stack file as well as a stack name", async () => {
    const { code, stdout } = await check("stacks/Pulumi.demo.yaml", "--json");
    expect(code).toBe(0);
    expect(JSON.parse(stdout).resources[0]).toMatchObject({ type: "multienv:index:MultiEnv", name: "demo" });
  });

  it("reports every plan problem at once, one line each naming the config path, and exits 1", async () => {
    const path = stackFile(
      "broken",
      [
        "config:",
        "  multienv:websites:",
        "    gh:",
        "      live: true",
        '      domains: ["140.82.112.3"]',
        "      server: {image: x}",
        "  multienv:computers:",
        "    c:",
        "      network: allow-all",
        '      startTabs: ["https://example.com/"]',
      ].join("\n"),
    );
    const { code, stdout, stderr } = await check(path);
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr).not.toMatch(NO_STACK_TRACE);
    const lines = stderr.trim().split("\n");
    expect(lines[0]).toMatch(/^multienv check broken: \d+ problems in /);
    expect(lines.some((l) => l.startsWith("multienv:websites.gh.domains[0]:") && l.includes("140.82.112.3"))).toBe(
      true,
    );
    expect(lines.some((l) => l.startsWith("multienv:computers.c.startTabs[0]:") && l.includes("example.com"))).toBe(
      true,
    );
  });

  it("reports the schema's problems and the plan rules' problems of the parts that parsed in one run", async () => {
    const path = stackFile(
      "mixed",
      [
        "config:",
        "  multienv:websites:",
        "    gh: {live: true, domains: [], server: {image: x}}",
        "    api: {live: true, domains: [api.example.com], server: {image: x}, frontend: {image: y}}",
        "    shop: {domains: [shop.test], allowHosts: [cdn.example.com], server: {image: x}, frontend: {image: y}}",
        "    typo: {domains: [typo.test], sever: {image: x}}",
        "  multienv:computers:",
        "    c: {network: 5}",
        '    d: {network: allow-all, startTabs: ["https://nowhere.test/"]}',
        "  multienv:captureTraffic: maybe",
      ].join("\n"),
    );
    const { code, stderr } = await check(path);
    expect(code).toBe(1);
    expect(stderr).not.toMatch(NO_STACK_TRACE);
    const lines = stderr.trim().split("\n").slice(1);
    const at = (prefix: string) => lines.filter((l) => l.startsWith(prefix));
    // the schema's
    expect(at("multienv:websites.typo.sever:")).toHaveLength(1);
    expect(at("multienv:computers.c.network:")).toHaveLength(1);
    expect(at("multienv:captureTraffic:")).toHaveLength(1);
    // the plan rules', on the sites that parsed
    expect(at("multienv:websites.gh.domains:")).toHaveLength(1);
    expect(at("multienv:websites.api.frontend:")).toHaveLength(1);
    expect(at("multienv:websites.shop.allowHosts:")).toHaveLength(1);
    // a start tab is not judged against websites of which one failed the schema: typo might have claimed it
    expect(at("multienv:computers.d.startTabs")).toEqual([]);
  });

  it("lists every problem of a file at once, whatever else is wrong: a file: start tab beside unknown keys, a plaintext secret and a tab that can never load", async () => {
    const path = stackFile(
      "several",
      [
        "config:",
        "  multienv:captureTrafic: true",
        "  multienv:githubToken: ghp_plaintext",
        "  multienv:websites:",
        "    shop: {domains: [shop.test], server: {image: x}}",
        "    gh: {live: true, domains: [github.com], server: {image: x}, secretSettings: {token: githubToken}}",
        "  multienv:computers:",
        '    a: {network: [example.org], routesSite: false, startTabs: ["file:///etc/passwd"]}',
        '    b: {network: [example.org], routesSites: false, startTabs: ["https://93.184.215.14/", "https://github.com/"]}',
      ].join("\n"),
    );
    const { code, stdout } = await check(path, "--json");
    expect(code).toBe(1);
    const { problems } = JSON.parse(stdout) as { problems: string[] };
    expect(problems.map((line) => line.split(": ")[0]).sort()).toEqual(
      [
        "multienv:captureTrafic",
        "multienv:computers.a.routesSite",
        "multienv:computers.a.startTabs[0]",
        "multienv:computers.b.startTabs[0]",
        "multienv:websites.gh.secretSettings.token",
        "multienv:websites.shop.frontend.image",
      ].sort(),
    );
    expect(problems.find((l) => l.startsWith("multienv:computers.a.startTabs[0]:"))).toContain("not an http(s) URL");
    expect(problems.find((l) => l.startsWith("multienv:computers.b.startTabs[0]:"))).toContain("can never load");
    expect(stdout).not.toContain("ghp_plaintext");

    // A website that fails the schema leaves the rules that read every website unjudged, and the tabs' URLs judged.
    const withBrokenSite = stackFile(
      "brokensite",
      [
        "config:",
        "  multienv:websites:",
        "    shop: {domains: [shop.test], sever: {image: x}}",
        "  multienv:computers:",
        '    c: {network: allow-all, startTabs: ["file:///etc/passwd", "https://nowhere.test/"]}',
      ].join("\n"),
    );
    const broken = JSON.parse((await check(withBrokenSite, "--json")).stdout) as { problems: string[] };
    expect(broken.problems.map((line) => line.split(": ")[0])).toEqual([
      "multienv:websites.shop.sever",
      "multienv:computers.c.startTabs[0]",
    ]);
  });

  it("refuses an unknown key and --json says why with ok: false", async () => {
    const path = stackFile(
      "typo",
      ["config:", "  multienv:websites:", "    shop:", "      domains: [shop.test]", "      sever: {image: y}"].join(
        "\n",
      ),
    );
    const { code, stdout } = await check(path, "--json");
    expect(code).toBe(1);
    const result = JSON.parse(stdout);
    expect(result).toMatchObject({ ok: false, resources: [], outputs: {} });
    expect(result.problems).toEqual([expect.stringMatching(/^multienv:websites\.shop\.sever: unknown key/)]);
  });

  it("refuses a secret setting whose config key holds plaintext, naming the key and the fix", async () => {
    const path = stackFile(
      "plain",
      [
        "config:",
        "  multienv:websites:",
        "    gh:",
        "      live: true",
        "      domains: [github.com]",
        "      server: {image: x}",
        "      secretSettings: {token: githubToken}",
        "  multienv:githubToken: ghp_plaintext",
      ].join("\n"),
    );
    const { code, stderr } = await check(path);
    expect(code).toBe(1);
    expect(stderr).toContain("githubToken");
    expect(stderr).toContain("pulumi config set --secret githubToken");
    expect(stderr).not.toContain("ghp_plaintext");
  });

  it("refuses a site without its images, naming each config key, before rendering anything", async () => {
    const path = stackFile(
      "noimage",
      ["config:", "  multienv:websites:", "    shop:", "      domains: [shop.test]"].join("\n"),
    );
    const { code, stderr } = await check(path);
    expect(code).toBe(1);
    expect(stderr).not.toMatch(NO_STACK_TRACE);
    expect(stderr.trim().split("\n")).toEqual([
      expect.stringMatching(/^multienv check noimage: 2 problems in /),
      "multienv:websites.shop.server.image: a website's server needs an image (the task's own site image); set it",
      "multienv:websites.shop.frontend.image: a synthetic site's frontend needs an image (the task's own site image); set it",
    ]);
  });

  it("refuses a stack with no website and no computer", async () => {
    const { code, stderr } = await check(stackFile("empty", "config:\n  multienv:target: docker\n"));
    expect(code).toBe(1);
    expect(stderr.trim().split("\n")[1]).toBe(
      "multienv: the stack has no website and no computer, so it would deploy a gateway with nothing behind it; add a website (websites.<name>) or a computer (computers.<name>), as stacks/Pulumi.demo.yaml does",
    );
  });

  it("--json prints JSON for a file that is not YAML, or whose aliases explode, naming the file and line", async () => {
    const bomb = stackFile(
      "bomb",
      'a: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n' +
        "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nconfig: {}\n",
    );
    const broken = stackFile("broken", "config:\n  multienv:websites: {shop: [\n");
    for (const file of [bomb, broken]) {
      const { code, stdout, stderr } = await check(file, "--json");
      expect(code).toBe(1);
      expect(stderr).toBe("");
      const result = JSON.parse(stdout);
      expect(result.ok).toBe(false);
      expect(result.problems.length).toBeGreaterThan(0);
      for (const problem of result.problems) expect(problem).toMatch(/ line \d+: not /);
      expect(result.problems[0]).toContain(file);
    }
    // The bomb's line is its first alias's.
    expect(JSON.parse((await check(bomb, "--json")).stdout).problems).toEqual([
      `multienv: ${bomb} line 2: not a stack file: its YAML aliases (*name) expand to a value far larger than the file; write each value out instead of aliasing aliases`,
    ]);
  });

  it("says which file it could not read", async () => {
    const { code, stderr } = await check("no-such-stack");
    expect(code).toBe(1);
    expect(stderr).toContain("stacks/Pulumi.no-such-stack.yaml");
    expect(stderr).toContain("no such file");
  });
});
