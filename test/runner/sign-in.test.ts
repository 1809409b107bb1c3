// Sign-in against the real gateway, the sample live site's /session and a real headless Chromium registered as
// the gateway's computer: the session's cookies and local storage land in the browser's own context over
// DevTools through the gateway, and sign-out removes exactly the site's.
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cookieBelongsTo, signIn, signOut } from "../../src/runner/lifecycle/sign-in";
import { cleanup } from "../helpers/processes";
import { startChromium, type Chromium } from "../helpers/chromium";
import { startHttpServer } from "../helpers/servers";
import { startLiveSite, startTestGateway } from "./helpers";
import { TOKEN } from "../gateway/helpers";

let browser: Chromium;
let gatewayUrl: string;

const NOTES_SESSION = {
  cookies: [
    {
      name: "sid",
      value: "n-1",
      domain: "notes.test",
      path: "/",
      expires: -1,
      httpOnly: false,
      secure: false,
      sameSite: "Lax",
    },
  ],
  origins: [{ origin: "http://notes.test", localStorage: [{ name: "draft", value: "hello from the session" }] }],
};

beforeAll(async () => {
  browser = await startChromium();
  const github = await startLiveSite({
    name: "github",
    domains: ["github.com", "*.github.com"],
    account: "alex",
    sessionDomain: "github.com",
  });
  const notes = await startHttpServer((req) => (req.url === "/session" ? JSON.stringify(NOTES_SESSION) : "{}"));
  const broken = await startHttpServer(() => JSON.stringify({ cookies: [{ name: "half" }] }));
  const gateway = await startTestGateway({
    sites: { github: { server: github.url, live: true }, notes: { server: notes.url }, broken: { server: broken.url } },
    computers: { agent: { cdp: browser.cdp } },
  });
  gatewayUrl = gateway.url;
});
afterAll(cleanup);

/** Looks into the browser directly (not through the gateway), as a test's independent observer. */
async function observe<T>(look: (b: Browser) => Promise<T>): Promise<T> {
  const direct = await chromium.connectOverCDP(browser.cdp);
  try {
    return await look(direct);
  } finally {
    await direct.close();
  }
}

async function localStorageAt(origin: string, key: string): Promise<string | null> {
  return observe(async (b) => {
    const page = await b.contexts()[0].newPage();
    await page.route("**/*", (route) =>
      route.fulfill({ status: 200, contentType: "text/html", body: "<html></html>" }),
    );
    await page.goto(origin);
    const value = await page.evaluate(
      (k) => (globalThis as unknown as { localStorage: { getItem(k: string): string | null } }).localStorage.getItem(k),
      key,
    );
    await page.close();
    return value;
  });
}

const cookieNames = () =>
  observe(async (b) => (await b.contexts()[0].cookies()).map((c) => `${c.name}@${c.domain}`).sort());

describe("sign-in", () => {
  it("loads the live site's session cookie into the computer's browser through the gateway", async () => {
    const result = await signIn({ access: { gatewayUrl, controlToken: TOKEN }, site: "github", computer: "agent" });
    expect(result).toEqual({ cookies: 1, origins: 0 });
    const cookies = await observe(async (b) => b.contexts()[0].cookies("https://github.com/"));
    expect(cookies).toEqual([
      expect.objectContaining({
        name: "user_session",
        value: "alex",
        domain: ".github.com",
        httpOnly: true,
        secure: true,
      }),
    ]);
  });

  it("loads a session's local storage for its origin, sending nothing to the origin", async () => {
    const result = await signIn({ access: { gatewayUrl, controlToken: TOKEN }, site: "notes", computer: "agent" });
    expect(result).toEqual({ cookies: 1, origins: 1 });
    expect(await localStorageAt("http://notes.test", "draft")).toBe("hello from the session");
    expect(await cookieNames()).toContain("sid@notes.test");
  });

  it("signs out of one site: its cookies and storage go, another site's stay", async () => {
    await signIn({ access: { gatewayUrl, controlToken: TOKEN }, site: "github", computer: "agent" });
    await signIn({ access: { gatewayUrl, controlToken: TOKEN }, site: "notes", computer: "agent" });

    const out = await signOut({
      access: { gatewayUrl, controlToken: TOKEN },
      site: "notes",
      computer: "agent",
      domains: ["notes.test"],
    });

    expect(out.cookies).toBe(1);
    expect(await cookieNames()).toEqual(["user_session@.github.com"]);
    expect(await localStorageAt("http://notes.test", "draft")).toBeNull();

    await signOut({
      access: { gatewayUrl, controlToken: TOKEN },
      site: "github",
      computer: "agent",
      domains: ["github.com", "*.github.com"],
    });
    expect(await cookieNames()).toEqual([]);
  });

  it("is refused the session without the control token, and names a session that is not storage state", async () => {
    // The session is a live account's: /svc/ wants the control token like every route of the runner's listener.
    await expect(
      signIn({ access: { gatewayUrl, controlToken: "wrong" }, site: "github", computer: "agent" }),
    ).rejects.toThrow(/site github did not give its session \(GET \/svc\/github\/session\): HTTP 401/);
    expect(await cookieNames()).toEqual([]);
    await expect(
      signIn({ access: { gatewayUrl, controlToken: TOKEN }, site: "broken", computer: "agent" }),
    ).rejects.toThrow(/site broken's session is not Playwright storage state: cookies\[0\]\.value/);
    await expect(
      signIn({ access: { gatewayUrl, controlToken: TOKEN }, site: "github", computer: "nobody" }),
    ).rejects.toThrow(/could not reach computer nobody's browser over DevTools through the gateway/);
  });
});

describe("which cookies belong to a site", () => {
  it("matches exact domains, wildcards and leading-dot domains", () => {
    expect(cookieBelongsTo(".github.com", ["github.com"])).toBe(true);
    expect(cookieBelongsTo("github.com", ["github.com"])).toBe(true);
    expect(cookieBelongsTo("api.github.com", ["github.com"])).toBe(false);
    expect(cookieBelongsTo("api.github.com", ["*.github.com"])).toBe(true);
    expect(cookieBelongsTo(".github.com", ["*.github.com"])).toBe(true);
    expect(cookieBelongsTo("github.com", ["*.github.com"])).toBe(false);
    expect(cookieBelongsTo("notgithub.com", ["*.github.com", "github.com"])).toBe(false);
  });
});
