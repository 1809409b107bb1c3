// A pooled site's cleanup at `down` resets the site for the account only while this stack's lease still holds it: the
// provider's own delete, against a real SQLite lease store and a loopback server standing in for the gateway (its card
// and the site's reset route, each reset counted). Held: renewed under its own id, then reset once. Expired and taken
// by another holder (the same stack name from another state): no reset, and the other's lease untouched.
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openLeaseStore, type LeaseStore } from "../../src/accounts";
import { bearer } from "../../src/protocol/auth";
import { CARD_PATH, WEBSITE_V1_URN, type GatewayCard } from "../../src/protocol/card";
import { siteCleanup, type CleanupLease, type SiteCleanupInputs } from "../../src/providers/site-cleanup";
import { cleanup, onCleanup, tempDir } from "../helpers/processes";
import { startHttpServer, type TestHttpServer } from "../helpers/servers";
import { until } from "../helpers/until";

afterEach(cleanup);

const CONTROL_TOKEN = "control-token-of-the-test";
const RESET_PATH = "/svc/shop/reset";

/** The gateway's card, naming the site's reset route, and that route answering 200. */
async function gateway(): Promise<TestHttpServer> {
  const card: GatewayCard = {
    name: "gateway",
    extensions: [],
    sites: {
      shop: {
        name: "shop",
        basePath: "/svc/shop",
        extensions: [{ uri: WEBSITE_V1_URN, paths: { reset: RESET_PATH } }],
      },
    },
  };
  return startHttpServer((req, res) => {
    res.writeHead(200, { "Content-Type": "application/json" });
    return req.url === CARD_PATH ? JSON.stringify(card) : "{}";
  });
}

const resetsOf = (server: TestHttpServer) => server.requests.filter((r) => r.method === "POST" && r.url === RESET_PATH);

async function storeAt(file: string): Promise<LeaseStore> {
  const store = await openLeaseStore({ sqliteFile: file });
  onCleanup(() => store.close());
  await store.syncPool("gh", ["acct-1"]);
  return store;
}

function cleanupOf(server: TestHttpServer, lease: CleanupLease): SiteCleanupInputs {
  return { gatewayUrl: server.url, controlToken: CONTROL_TOKEN, site: "shop", account: "acct-1", lease };
}

describe("a pooled site's cleanup at down", () => {
  it("resets the site once while this stack's lease holds the account, renewing it first", async () => {
    const sqliteFile = path.join(tempDir("multienv-cleanup-"), "accounts.sqlite");
    const store = await storeAt(sqliteFile);
    const leased = await store.tryLease("gh", { id: "lease-a", name: "task-1" }, 60_000);
    expect(leased?.account).toBe("acct-1");
    const server = await gateway();

    await siteCleanup.delete!(
      "shop/acct-1",
      cleanupOf(server, { pool: "gh", leaseId: "lease-a", leaseHours: 1, sqliteFile }),
    );

    expect(resetsOf(server)).toHaveLength(1);
    expect(resetsOf(server)[0].headers.authorization).toBe(bearer(CONTROL_TOKEN));
    // Renewed for the reset (an hour, not the minute it was leased for), still this lease's.
    const [row] = await store.accounts("gh");
    expect(row.holderId).toBe("lease-a");
    expect(row.until!.getTime()).toBeGreaterThan(leased!.until.getTime() + 30 * 60_000);
  });

  it("leaves the site alone when the lease expired and another holder took the account", async () => {
    const sqliteFile = path.join(tempDir("multienv-cleanup-"), "accounts.sqlite");
    const store = await storeAt(sqliteFile);
    await store.tryLease("gh", { id: "lease-a", name: "task-1" }, 1);
    await until("the lease expired", async () => Date.now() > (await store.accounts("gh"))[0].until!.getTime() + 1);
    // The same stack name from another state takes the account: its task now runs signed in as acct-1.
    const theirs = await store.tryLease("gh", { id: "lease-b", name: "task-1" }, 60_000);
    expect(theirs).toMatchObject({ account: "acct-1", kept: false });
    const server = await gateway();

    await siteCleanup.delete!(
      "shop/acct-1",
      cleanupOf(server, { pool: "gh", leaseId: "lease-a", leaseHours: 1, sqliteFile }),
    );

    expect(resetsOf(server)).toEqual([]);
    const [row] = await store.accounts("gh");
    expect(row).toMatchObject({ holderId: "lease-b", heldBy: "task-1" });
    expect(row.until!.getTime()).toBe(theirs!.until.getTime());
  });
});
