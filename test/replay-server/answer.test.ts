// What is sent for a recorded response: its headers less the connection's and the recomputed framing, a text body's
// charset made the UTF-8 it is sent in, and an HTML document with the determinism script and a widened policy.
import { describe, expect, it } from "vitest";
import { answerOf, utf8ContentType } from "../../src/replay-server/answer";
import { recordingOf } from "../../src/replay-server/recording";
import { entry, har } from "./helpers";

async function answerFor(options: Parameters<typeof entry>[1]) {
  const { exchanges } = await recordingOf(har([entry("https://shop.example/p", options)]), "t.har");
  return answerOf(exchanges[0]);
}

const named = (headers: string[]) => headers.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());

describe("answerOf", () => {
  it("drops pseudo-headers, hop-by-hop headers, those Connection names, framing and Alt-Svc; keeps repeats", async () => {
    const answer = await answerFor({
      mimeType: "text/css",
      headers: [
        [":status", "200"],
        ["content-type", "text/css"],
        ["connection", "x-conn"],
        ["x-conn", "1"],
        ["keep-alive", "timeout=5"],
        ["content-length", "1"],
        ["content-encoding", "br"],
        ["alt-svc", 'h3=":443"'],
        ["link", "<a.css>; rel=preload"],
        ["link", "<b.css>; rel=preload"],
      ],
      body: "p{}",
    });
    expect(named(answer.headers)).toEqual(["content-type", "link", "link"]);
    expect(answer.body.toString()).toBe("p{}");
  });

  it("sends a recorded 304 or 204 without a body", async () => {
    expect((await answerFor({ status: 304, body: "stale" })).body.length).toBe(0);
  });

  it("injects the script into an HTML document at the recorded time and lets it through the recorded policy", async () => {
    const answer = await answerFor({
      started: "2024-03-01T12:00:00.000Z",
      headers: { "Content-Type": "text/html; charset=iso-8859-1", "Content-Security-Policy": "script-src 'self'" },
      body: "<html><head></head><body>x</body></html>",
    });
    const html = answer.body.toString();
    expect(html).toMatch(/^<html><head><script>.*t=1709294400000.*<\/script><\/head>/s);
    const headers = Object.fromEntries(
      answer.headers.flatMap((v, i, a) => (i % 2 === 0 ? [[v.toLowerCase(), a[i + 1]]] : [])),
    );
    expect(headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(headers["content-security-policy"]).toMatch(/^script-src 'self' 'sha256-[A-Za-z0-9+/]+=*'$/);
  });

  it("leaves a body that is not HTML as recorded", async () => {
    const answer = await answerFor({ mimeType: "application/json", body: '{"a":"<head>"}' });
    expect(answer.body.toString()).toBe('{"a":"<head>"}');
  });
});

describe("utf8ContentType", () => {
  it("says UTF-8 where a charset was named, and for HTML", () => {
    expect(utf8ContentType("text/css; charset=Shift_JIS")).toBe("text/css; charset=utf-8");
    expect(utf8ContentType("text/html")).toBe("text/html; charset=utf-8");
    expect(utf8ContentType("application/json")).toBe("application/json");
  });
});
