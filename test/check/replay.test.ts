// `multienv check` on a stack that replays a live site: the real bin, a real process, real files.
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(__dirname, "..", "..");
const BIN = join(ROOT, "bin", "multienv.js");
const NO_STACK_TRACE = /^\s+at .+:\d+:\d+\)?$/m;

function check(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(process.execPath, [BIN, "check", ...args], { cwd: ROOT, timeout: 90_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
      done({ code, stdout, stderr });
    });
  });
}

const dir = mkdtempSync(join(tmpdir(), "multienv-check-replay-"));

function entry(url: string): unknown {
  return {
    startedDateTime: "2026-01-02T03:04:05.000Z",
    time: 1,
    request: { method: "GET", url, httpVersion: "HTTP/1.1", headers: [], queryString: [], cookies: [] },
    response: {
      status: 200,
      statusText: "OK",
      httpVersion: "HTTP/1.1",
      headers: [{ name: "Content-Type", value: "text/html" }],
      cookies: [],
      content: { size: 5, mimeType: "text/html", text: "hello" },
    },
  };
}

function har(name: string, urls: string[]): string {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify({ log: { version: "1.2", creator: { name: "t" }, entries: urls.map(entry) } }));
  return path;
}

function stack(name: string, recording: string, startTab = "https://github.com/"): string {
  const path = join(dir, `Pulumi.${name}.yaml`);
  writeFileSync(
    path,
    [
      "config:",
      "  multienv:websites:",
      "    gh:",
      "      live: true",
      '      domains: [github.com, "*.github.com"]',
      "      server: {image: multienv/sample-live-server}",
      `      replay: {file: ${JSON.stringify(recording)}, ignoreParams: [_]}`,
      "  multienv:computers:",
      "    desk:",
      "      network: none",
      `      startTabs: [${JSON.stringify(startTab)}]`,
    ].join("\n"),
  );
  return path;
}

describe.concurrent("multienv check with replay", () => {
  it("refuses a recording that does not exist, naming the file and the key", async () => {
    const missing = join(dir, "nowhere.har");
    const { code, stdout, stderr } = await check(stack("missing", missing));
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr).not.toMatch(NO_STACK_TRACE);
    expect(stderr).toContain(`multienv:websites.gh.replay: the recording ${missing} does not exist`);
  });

  it("refuses a file that is not HAR, naming it", async () => {
    const notJson = join(dir, "page.html");
    writeFileSync(notJson, "<html>not a recording</html>");
    const notHar = join(dir, "other.json");
    writeFileSync(notHar, JSON.stringify({ entries: [] }));
    const [a, b] = await Promise.all([check(stack("notjson", notJson)), check(stack("nothar", notHar))]);
    expect(a.code).toBe(1);
    expect(a.stderr).toContain(`multienv:websites.gh.replay: recording ${notJson}: is not JSON`);
    expect(b.code).toBe(1);
    expect(b.stderr).toContain(`multienv:websites.gh.replay: recording ${notHar}: is not HAR (no "log" object)`);
    for (const { stderr } of [a, b]) expect(stderr).not.toMatch(NO_STACK_TRACE);
  });

  it("refuses a recording with no entry for any of the site's names, saying what it holds", async () => {
    const other = har("other-site.har", ["https://example.org/", "https://cdn.example.org/app.js"]);
    const { code, stderr } = await check(stack("elsewhere", other));
    expect(code).toBe(1);
    expect(stderr).toContain(
      `multienv:websites.gh.replay: the recording ${other} holds no entry for any of the site's names (github.com, *.github.com); it holds example.org, cdn.example.org`,
    );
  });

  it("passes a recording of the site, warns of a start tab it lacks, and shows the replay server and its marks", async () => {
    const file = har("gh.har", ["https://github.com/", "https://api.github.com/user"]);
    const sha = createHash("sha256")
      .update(
        JSON.stringify({
          log: {
            version: "1.2",
            creator: { name: "t" },
            entries: ["https://github.com/", "https://api.github.com/user"].map(entry),
          },
        }),
      )
      .digest("hex");
    const good = await check(stack("good", file), "--json");
    expect(good.code).toBe(0);
    const result = JSON.parse(good.stdout);
    expect(result.warnings).toEqual([]);
    const replay = result.resources.find(
      (r: { name: string; type: string }) =>
        r.name === "good-gh-replay-container" && r.type === "docker:index/container:Container",
    );
    expect(replay.inputs.name).toBe("good-gh-replay");
    expect(JSON.stringify(replay.inputs.networksAdvanced)).toContain("gh-replay");
    expect(JSON.stringify(replay.inputs.networksAdvanced)).not.toContain("egress");
    const server = result.resources.find(
      (r: { name: string; type: string }) =>
        r.name === "good-gh-server" && r.type === "docker:index/container:Container",
    );
    expect(JSON.stringify(server.inputs.networksAdvanced)).not.toContain("egress");
    expect(
      result.resources.some(
        (r: { type: string; inputs: { name?: string } }) =>
          r.type === "docker:index/remoteImage:RemoteImage" && r.inputs.name === `multienv/replay-recording:${sha}`,
      ),
    ).toBe(true);
    expect(result.outputs.replayedWebsites).toEqual([{ name: "gh", recording: file, sha256: sha }]);
    expect(result.outputs.liveWebsites).toEqual([]);
    expect(result.outputs.reproducible).toBe(true);

    const tab = await check(stack("tab", file, "https://github.com/settings"));
    expect(tab.code).toBe(0);
    expect(tab.stderr).toContain(
      `multienv:computers.desk.startTabs[0]: https://github.com/settings is not in the recording ${file} of replayed site gh`,
    );
  });
});
