// Which lines of a site-proxy log are an episode's: the proxy marks where each episode begins (a self-test marks
// episode 1 at deploy, each reset the next one), and the evidence of an episode is its lines alone.
import { describe, expect, it } from "vitest";
import { episodeOf, parseLiveSiteProxyLog } from "../../src/protocol/site-proxy";

const line = (record: Record<string, unknown>) =>
  JSON.stringify({ event: record.event, time: "2026-12-01T00:00:00.000Z", ...record }) + "\n";
const startup = line({ event: "startup", pid: 1 });
const selfTestStart = line({ event: "self-test", phase: "start", ended: 0 });
const selfTestEnd = line({ event: "self-test", phase: "end", ended: 3 });
const selfTest = selfTestStart + line({ event: "connection", host: "example.com" }) + selfTestEnd;
const mark = (episode: number) => line({ event: "episode", episode, ended: 2 });
const visit = (host: string) => line({ event: "connection", host });

describe("episodeOf", () => {
  it("is the whole log when nothing was marked", () => {
    const log = startup + visit("shop.test");
    expect(episodeOf(log)).toBe(log);
    expect(episodeOf(log, 1)).toBe(log);
  });

  it("leaves out a self-test's lines, at deploy or in the middle of an episode", () => {
    expect(episodeOf(startup + selfTest + visit("shop.test"))).toBe(startup + visit("shop.test"));
    const log =
      startup + mark(1) + visit("one.test") + selfTest + visit("still-one.test") + mark(2) + visit("two.test");
    expect(episodeOf(log, 1)).toBe(mark(1) + visit("one.test") + visit("still-one.test"));
    expect(episodeOf(log, 2)).toBe(mark(2) + visit("two.test"));
  });

  it("keeps every line after a self-test's start that has no end (a self-test that died), dropping nothing on a guess", () => {
    const log = startup + selfTestStart + visit("example.com") + visit("shop.test");
    expect(episodeOf(log)).toBe(log);
  });

  it("reads one episode between its mark and the next, and the one under way to the end", () => {
    const log = startup + mark(1) + visit("one.test") + mark(2) + visit("two.test") + mark(3) + visit("three.test");
    expect(episodeOf(log, 1)).toBe(mark(1) + visit("one.test"));
    expect(episodeOf(log, 2)).toBe(mark(2) + visit("two.test"));
    expect(episodeOf(log, 3)).toBe(mark(3) + visit("three.test"));
    expect(episodeOf(log)).toBe(mark(3) + visit("three.test"));
  });

  it("reads episode 1 of a log a self-test did not mark from the start to the first reset's mark", () => {
    const log = startup + visit("one.test") + mark(2) + visit("two.test");
    expect(episodeOf(log, 1)).toBe(startup + visit("one.test"));
    expect(episodeOf(log, 2)).toBe(mark(2) + visit("two.test"));
  });

  it("is not fooled by a host whose name spells a mark, nor by a torn last line", () => {
    const log = mark(1) + visit('{"event":"episode","episode":9}') + '{"event":"episode","epi';
    expect(episodeOf(log)).toBe(log);
  });
});

describe("parseLiveSiteProxyLog", () => {
  it("reads every complete line and skips a last line still being written", () => {
    const complete = startup + visit("shop.test");
    expect(parseLiveSiteProxyLog(complete).map((r) => r.event)).toEqual(["startup", "connection"]);
    expect(parseLiveSiteProxyLog(complete + '{"event":"connection","host":"tor').map((r) => r.event)).toEqual([
      "startup",
      "connection",
    ]);
    // a last line complete but for its newline is read
    expect(parseLiveSiteProxyLog(complete + visit("two.test").trimEnd())).toHaveLength(3);
  });

  it("still fails on a broken line before the last: that is not a log being written", () => {
    expect(() => parseLiveSiteProxyLog(startup + "{broken\n" + visit("shop.test"))).toThrow();
  });
});
