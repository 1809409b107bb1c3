// A pool's PostgreSQL store whose URL holds no password, against a real server that asks for one: the lease resource
// (in a process of its own, as the engine runs it) finds the password where libpq's users keep it (PGPASSWORD,
// a ~/.pgpass file) or in the pool's secret (`storePassword`, put into the URL by the pool's program), and without
// any of them fails in words that say so, the password never in them.
import { chmodSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { withStorePassword } from "../../src/accounts";
import { startPostgres, type PostgresServer } from "../helpers/postgres";
import { cleanup, tempDir } from "../helpers/processes";
import { until } from "../helpers/until";
import { event, startWorker, type Worker } from "./helpers";

afterEach(cleanup);

/** A password with every character a URL or a .pgpass line treats specially. */
const PASSWORD = "s3:cr/t@p%ss\\w#rd ok";

/** No password anywhere the pg driver looks, unless the test gives one. */
const NOWHERE = { PGPASSWORD: undefined, PGPASSFILE: "/nonexistent/pgpass" };

async function outcome(worker: Worker): Promise<Record<string, unknown>> {
  return until("a lease or a failure", () => event(worker, "leased") ?? event(worker, "failed"), 60_000);
}

function leaseWith(server: PostgresServer, env: NodeJS.ProcessEnv, store = server.url): Worker {
  return startWorker({ store }, "task-17", {
    accounts: ["alex", "kim", "sam", "lee"],
    leaseHours: 1,
    waitMs: 5_000,
    resource: true,
    env: { ...NOWHERE, ...env },
  });
}

describe("a PostgreSQL store's password kept out of the pool's stack file", () => {
  it("is read from PGPASSWORD, from a .pgpass file, or from the pool's secret; without one the lease fails saying why", async () => {
    const server = await startPostgres({ password: PASSWORD });
    expect(new URL(server.url).password).toBe("");

    expect(await outcome(leaseWith(server, { PGPASSWORD: PASSWORD }))).toMatchObject({ event: "leased" });

    // ~/.pgpass as libpq writes it: host:port:database:user:password, `:` and `\` escaped; only its owner may read it.
    const pgpass = path.join(tempDir("pgpass-"), ".pgpass");
    const escaped = PASSWORD.replace(/\\/g, "\\\\").replace(/:/g, "\\:");
    writeFileSync(pgpass, `127.0.0.1:${server.port}:*:postgres:${escaped}\n`);
    chmodSync(pgpass, 0o600);
    expect(await outcome(leaseWith(server, { PGPASSFILE: pgpass }))).toMatchObject({ event: "leased" });

    // The pool's secret, put into the URL as the pool's program puts it (percent-encoded).
    const fromSecret = leaseWith(server, {}, withStorePassword(server.url, PASSWORD));
    expect(await outcome(fromSecret)).toMatchObject({ event: "leased" });

    const without = await outcome(leaseWith(server, {}));
    expect(without.event).toBe("failed");
    expect(String(without.message)).toMatch(/password/);
    expect(String(without.message)).not.toContain(PASSWORD);
  }, 180_000);

  it("keeps a password the URL already has", () => {
    expect(withStorePassword("postgres://u:own@db/x", "other")).toBe("postgres://u:own@db/x");
    expect(withStorePassword("postgres://u@db/x", undefined)).toBe("postgres://u@db/x");
  });
});
