// The sample sites as real processes on loopback (the bundles' sources run with tsx): what the e2e tier
// and a task author rely on: cards, /ready, the data plane, /echo, the shop's sign-in cookie, and the
// live site's /session in Playwright storage-state shape with no pages.
import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CARD_PATH, parseCard, WEBSITE_V1_URN } from "../../src/protocol/card";
import { parseStorageState } from "../../src/protocol/session";

const REPO = path.resolve(__dirname, "../..");
const children: ChildProcess[] = [];

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

async function site(entry: string, settings?: unknown): Promise<string> {
  const port = await freePort();
  const env = {
    ...process.env,
    PORT: String(port),
    ...(settings ? { AGENTENV_WEBSITE_SETTINGS: JSON.stringify(settings) } : {}),
  };
  const child = spawn(process.execPath, [path.join(REPO, "node_modules/tsx/dist/cli.mjs"), path.join(REPO, entry)], {
    env,
    stdio: "ignore",
  });
  children.push(child);
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (
      await fetch(`${base}/ready`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return base;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${entry} did not answer /ready`);
}

let shopServer: string;
let shopFrontend: string;
let liveServer: string;

beforeAll(async () => {
  [shopServer, shopFrontend, liveServer] = await Promise.all([
    site("examples/sites/shop-server/server.ts", { domains: ["shop.test"] }),
    site("examples/sites/shop-frontend/server.ts"),
    site("examples/sites/live-server/server.ts", { account: "alex", domains: ["github.com", "*.github.com"] }),
  ]);
}, 30_000);

afterAll(() => children.forEach((c) => c.kill()));

describe("synthetic shop", () => {
  it("serves its card, its data plane and an echo of the request's headers", async () => {
    const card = parseCard(await (await fetch(shopServer + CARD_PATH)).json());
    expect(card?.extensions.find((e) => e.uri === WEBSITE_V1_URN)).toMatchObject({
      params: { domains: ["shop.test"], live: false },
      paths: { ready: "/ready" },
    });
    expect(
      await (await fetch(`${shopServer}/data`, { method: "POST", body: JSON.stringify({ sku: 1 }) })).json(),
    ).toEqual({ items: [{ sku: 1 }] });
    expect(await (await fetch(`${shopServer}/data`)).json()).toEqual({ items: [{ sku: 1 }] });
    expect((await fetch(`${shopServer}/data`, { method: "POST", body: "not json" })).status).toBe(400);
    const echo = (await (await fetch(`${shopServer}/echo`, { headers: { authorization: "Bearer x" } })).json()) as {
      headers: Record<string, string>;
    };
    expect(echo.headers.authorization).toBe("Bearer x");
  });

  it("signs in with a cookie and greets the user", async () => {
    const signin = await fetch(`${shopFrontend}/signin?user=alex`);
    const cookie = signin.headers.get("set-cookie")!;
    expect(cookie).toMatch(/^shop_user=alex; Path=\//);
    const home = await (
      await fetch(`${shopFrontend}/`, { headers: { cookie: "shop_user=alex", "x-forwarded-host": "shop.test" } })
    ).text();
    expect(home).toContain("<title>Synthetic shop</title>");
    expect(home).toContain('<p id="user">alex</p>');
    expect(home).toContain('<p id="host">shop.test</p>');
    const bench = await (await fetch(`${shopFrontend}/bench?n=50`)).text();
    expect(bench.match(/<img /g)).toHaveLength(50);
  });
});

describe("live-site server", () => {
  it("serves its card, /session as storage state, and no pages", async () => {
    const card = parseCard(await (await fetch(liveServer + CARD_PATH)).json());
    expect(card?.extensions[0]).toMatchObject({
      uri: WEBSITE_V1_URN,
      params: { live: true, domains: ["github.com", "*.github.com"] },
      paths: { session: "/session" },
    });
    const session = parseStorageState(await (await fetch(`${liveServer}/session`)).json());
    expect(session.ok && session.state.cookies).toEqual([
      expect.objectContaining({ name: "user_session", value: "alex", domain: ".github.com", secure: true }),
    ]);
    expect((await fetch(`${liveServer}/`)).status).toBe(404);
    expect((await fetch(`${liveServer}/login`)).status).toBe(404);
  });
});
