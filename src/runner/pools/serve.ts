// `multienv serve`: the warm pools over HTTP, so a harness in any language claims and releases envs. It listens on
// 127.0.0.1 alone and answers only a request carrying its own token (`Authorization: Bearer`), made at start, written
// to .multienv/serve.token with mode 0600 and never printed. Its keeper keeps every pool of the store at its size. The
// claims it hands out are the library's (claims.ts): the same store, the same queue, so `multienv claim` and a harness
// using the library beside it are served in one arrival order.
import { randomBytes, timingSafeEqual } from "node:crypto";
import { mkdir, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { z } from "zod";
import type { LeaseStore } from "../../accounts";
import { errorMessage } from "../errors";
import { claimEnv, ClaimGoneError, DEFAULT_TTL_SECONDS, PoolBusyError, Readiness, renewClaim } from "./claims";
import { MemberForwards } from "./forwards";
import { PoolKeeper, type KeeperOptions } from "./keeper";
import { openPoolStore, pooledTasks, projectDirOf, taskOfClaim } from "./pool";
import { OPENAPI } from "./openapi";

export const DEFAULT_SERVE_PORT = 7878;
/** Where the token is written, under the project directory. */
export const SERVE_TOKEN_FILE = join(".multienv", "serve.token");
/** How often the keeper takes its turn on every pool. */
const KEEPER_TURN_MS = 1000;
/** The largest request body read (a claim's is tens of bytes). */
const MAX_BODY_BYTES = 16 * 1024;
/** The longest a claim may wait in one request. */
const MAX_WAIT_SECONDS = 600;

const ClaimBody = z.strictObject({
  task: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/, { error: "must be a task's stack name" }),
  ttlSeconds: z.number().int().min(1).max(86_400).optional(),
  waitSeconds: z.number().min(0).max(MAX_WAIT_SECONDS).optional(),
});
const RenewBody = z.strictObject({ ttlSeconds: z.number().int().min(1).max(86_400).optional() });

export interface ServeOptions extends KeeperOptions {
  /** Default 7878; 0 picks a free one. */
  port?: number;
  /** Run no keeper (claims and releases only): for tests of the claim path on members registered by hand. */
  keeper?: boolean;
}

export interface PoolService {
  url: string;
  port: number;
  tokenFile: string;
  close(): Promise<void>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

function send(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store", ...headers });
  res.end(text);
}

async function readJson(req: http.IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES)
      throw new HttpError(413, `body: more than ${MAX_BODY_BYTES} bytes; send a small JSON object`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, 'body: not JSON; send a JSON object such as {"task": "demo"}');
  }
}

/** The one line a bad body gets: its first problem, naming the field. */
function parsed<T>(schema: z.ZodType<T>, value: unknown): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const field = issue.path.length > 0 ? issue.path.join(".") : "body";
  const message =
    issue.code === "unrecognized_keys" ? `unknown field(s) ${issue.keys.join(", ")}; remove them` : issue.message;
  throw new HttpError(400, `${field}: ${message}`);
}

/** Starts the service; its token is written before it listens. */
export async function servePools(options: ServeOptions = {}): Promise<PoolService> {
  const projectDir = projectDirOf(options);
  const store: LeaseStore = await openPoolStore(options);
  const token = randomBytes(32).toString("hex");
  const tokenFile = join(projectDir, SERVE_TOKEN_FILE);
  await mkdir(dirname(tokenFile), { recursive: true });
  await rm(tokenFile, { force: true });
  await writeFile(tokenFile, `${token}\n`, { mode: 0o600 });
  // The claims' kubernetes port-forwards: one per member, kept while the service runs.
  const forwards = new MemberForwards(options.env);
  // The keeper wakes this service's waiting claims as it makes a member ready.
  const readiness = new Readiness();
  const keeper = new PoolKeeper(store, { ...options, forwards, readiness });
  const expected = Buffer.from(`Bearer ${token}`);
  const authorised = (req: http.IncomingMessage) => {
    const given = Buffer.from(req.headers.authorization ?? "");
    return given.length === expected.length && timingSafeEqual(given, expected);
  };
  const closing = new AbortController();

  async function route(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const path = url.pathname;
    if (!authorised(req))
      throw new HttpError(
        401,
        "authorization: send Authorization: Bearer <the token in .multienv/serve.token>",
        {},
        {
          "www-authenticate": "Bearer",
        },
      );
    if (req.method === "GET" && path === "/v1/openapi.json") return send(res, 200, OPENAPI);
    if (req.method === "GET" && path === "/v1/pools") {
      const tasks = await pooledTasks(store);
      const pools = await Promise.all(
        tasks.map(async (task) => {
          const { why: _why, ...state } = await keeper.state(task);
          return state;
        }),
      );
      return send(res, 200, { pools });
    }
    if (req.method === "POST" && path === "/v1/claims") {
      const body = parsed(ClaimBody, await readJson(req));
      try {
        const claim = await claimEnv(
          { task: body.task, ttlSeconds: body.ttlSeconds ?? DEFAULT_TTL_SECONDS, waitSeconds: body.waitSeconds ?? 0 },
          { ...options, openStore: store, signal: closing.signal, forwards, readiness },
        );
        return send(res, 201, claim);
      } catch (error) {
        if (error instanceof PoolBusyError)
          throw new HttpError(503, error.message, { pool: error.state }, { "retry-after": "1" });
        throw error;
      }
    }
    const claimPath = /^\/v1\/claims\/([^/]+)(\/renew)?$/.exec(path);
    if (claimPath !== null) {
      const id = decodeURIComponent(claimPath[1]);
      try {
        taskOfClaim(id);
      } catch (error) {
        throw new HttpError(404, errorMessage(error));
      }
      if (req.method === "POST" && claimPath[2] === "/renew") {
        const body = parsed(RenewBody, await readJson(req));
        return send(
          res,
          200,
          await renewClaim(id, body.ttlSeconds ?? DEFAULT_TTL_SECONDS, { ...options, openStore: store }),
        );
      }
      if (req.method === "DELETE" && claimPath[2] === undefined) {
        const collect = url.searchParams.get("collect");
        if (collect !== null && collect !== "true" && collect !== "false")
          throw new HttpError(400, "collect: must be true or false");
        const ended = await keeper.release(id, collect !== "false");
        return send(res, 202, { id, episode: ended.episode, stack: ended.member, state: "resetting" });
      }
    }
    throw new HttpError(404, `${req.method} ${path}: no such route; see GET /v1/openapi.json`);
  }

  const server = http.createServer((req, res) => {
    route(req, res).catch((error: unknown) => {
      if (res.headersSent) return res.destroy();
      if (error instanceof HttpError)
        return send(res, error.status, { error: error.message, ...error.extra }, error.headers);
      if (error instanceof ClaimGoneError) return send(res, 404, { error: error.message });
      options.log?.(
        `warning: ${req.method} ${new URL(req.url ?? "/", "http://x").pathname}: ${errorMessage(error).split("\n")[0]}`,
      );
      send(res, 500, { error: errorMessage(error).split("\n")[0] });
    });
  });
  server.requestTimeout = 0;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? DEFAULT_SERVE_PORT, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  let turn: NodeJS.Timeout | undefined;
  let turning: Promise<void> = Promise.resolve();
  if (options.keeper !== false) {
    const keep = async () => {
      for (const task of await pooledTasks(store)) await keeper.tick(task);
    };
    const schedule = () => {
      turn = setTimeout(() => {
        turning = keep()
          .catch((error: unknown) => options.log?.(`warning: keeper: ${errorMessage(error).split("\n")[0]}`))
          .finally(() => {
            if (!closing.signal.aborted) schedule();
          });
      }, KEEPER_TURN_MS);
    };
    schedule();
  }

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    tokenFile,
    async close() {
      closing.abort();
      clearTimeout(turn);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await turning;
      await keeper.idle();
      await forwards.closeAll();
      await store.close();
    },
  };
}
