// Where the determinism script goes in a page, and how a recorded Content-Security-Policy lets exactly it run.
import { describe, expect, it } from "vitest";
import {
  allowScriptInPolicy,
  deterministicScript,
  injectionPoint,
  injectScript,
  pageSeed,
  scriptHashSource,
} from "../../src/replay-server/determinism";

const at = (html: string) => html.slice(0, injectionPoint(Buffer.from(html, "latin1")));

describe("injectionPoint", () => {
  it("is after the <head> start tag", () => {
    expect(at('<!doctype html><html lang="en"><head data-x="1"><script>a()</script>')).toBe(
      '<!doctype html><html lang="en"><head data-x="1">',
    );
  });
  it("is before a page script that comes ahead of <head>, and never after a <header>", () => {
    expect(at("<!DOCTYPE html><script>early()</script><head></head>")).toBe("<!DOCTYPE html>");
    expect(at("<html><body><header>x</header><script>a()</script>")).toBe("<html>");
  });
  it("is at the start of a fragment, after a byte order mark", () => {
    expect(at("<p>hi</p><script>x()</script>")).toBe("");
    expect(injectionPoint(Buffer.from("\xef\xbb\xbf<p>x</p>", "latin1"))).toBe(3);
  });
  it("finds its place in a hostile page of tags that never close in one pass (each `<head` no longer searched to the end)", () => {
    // 170,000 unclosed `<head`s then a real `<html>`: a `<head[^>]*>` pattern tried at each took minutes here.
    const page = "<HEAD\t".repeat(170_000);
    expect(injectionPoint(Buffer.from(page, "latin1"))).toBe(0);
    expect(at(`${"<!doctype ".repeat(100_000)}`)).toBe("");
    expect(at(`<html lang=x>${"<head ".repeat(100_000)}`)).toBe("<html lang=x>");
  });
  it("keeps the page's bytes as they were around the script", () => {
    const page = Buffer.from("<html><head><title>caf\xe9</title></head></html>", "latin1");
    const injected = injectScript(page, "x()");
    expect(injected.toString("latin1")).toBe("<html><head><script>x()</script><title>caf\xe9</title></head></html>");
  });
});

describe("deterministicScript", () => {
  it("is the same for one page and time, and differs between pages", () => {
    const seed = pageSeed("https://shop.example/ 1709294400000");
    expect(deterministicScript(1709294400000, seed)).toBe(deterministicScript(1709294400000, seed));
    expect(pageSeed("https://shop.example/a 1")).not.toBe(pageSeed("https://shop.example/b 1"));
  });
});

describe("allowScriptInPolicy", () => {
  const hash = scriptHashSource("x()");
  it("adds the script's hash to the directive that governs inline scripts", () => {
    expect(allowScriptInPolicy("default-src 'self'; script-src 'self' 'nonce-abc'", hash)).toBe(
      `default-src 'self'; script-src 'self' 'nonce-abc' ${hash}`,
    );
    expect(allowScriptInPolicy("default-src 'self'; img-src *", hash)).toBe(`default-src 'self' ${hash}; img-src *`);
    expect(allowScriptInPolicy("script-src 'self'; script-src-elem 'self'", hash)).toBe(
      `script-src 'self'; script-src-elem 'self' ${hash}`,
    );
  });
  it("replaces 'none', and leaves alone a directive that allows every inline script already", () => {
    expect(allowScriptInPolicy("script-src 'none'", hash)).toBe(`script-src ${hash}`);
    expect(allowScriptInPolicy("script-src 'self' 'unsafe-inline'", hash)).toBe("script-src 'self' 'unsafe-inline'");
    expect(allowScriptInPolicy("img-src *", hash)).toBe("img-src *");
  });
  it("widens each policy of a header that holds several", () => {
    expect(allowScriptInPolicy("script-src 'self', default-src 'none'", hash)).toBe(
      `script-src 'self' ${hash}, default-src ${hash}`,
    );
  });
});
