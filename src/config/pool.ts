// An account pool's config: a stack of its own (`stacks/Pulumi.<pool>.yaml`) holding `multienv:pool`, the accounts a
// live site's tasks lease one each. Each account's `settings` and `secretSettings` are as a site's (a secret setting
// names a stack config key set with `pulumi config set --secret`); every one of them reaches the leased server as a
// secret. Validated here for the program (pool-load.ts, which reads it from Pulumi config) and `multienv check`
// (straight from the stack file, without Pulumi's SDK).
import { z } from "zod";
import { problem } from "../plan/problems";
import type { Problem } from "../plan/types";
import { ConfigError } from "./errors";
import { friendlyMessage, issuesToProblems, suggestion } from "./issues";
import { CONFIG_KEY } from "./schema";
import { secretReferenceProblems, type SecretKeyHolding } from "./secrets";
import { decodeConfigValue, type RawConfigValue } from "./validate";
import { readConfigSection } from "./stack-file";

/** The config key a pool stack holds its pool in (`multienv:pool`). */
export const POOL_KEY = "pool";

/** How long a lease lasts unless its stack's `up` runs again. */
export const DEFAULT_LEASE_HOURS = 24;

export const poolAccountSchema = z.strictObject({
  settings: z.record(z.string(), z.json()).default({}),
  secretSettings: z
    .record(
      z.string(),
      z.string().regex(CONFIG_KEY, {
        error: "must name a stack config key (letters, digits, _ and -, starting with a letter), e.g. alexToken",
      }),
    )
    .default({}),
});

export const poolSchema = z.strictObject({
  accounts: z
    .record(z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.@-]*$/), poolAccountSchema)
    .refine((accounts) => Object.keys(accounts).length > 0, {
      error: "needs at least one account: accounts.<name> with its settings and secretSettings",
    }),
  store: z
    .string()
    .regex(/^postgres(ql)?:\/\/\S+$/, {
      error:
        "must be a PostgreSQL URL such as postgres://multienv@db.internal/multienv (leave it out for this machine's own store)",
    })
    .refine((url) => URL.canParse(url), {
      error: "is not a URL; write postgres://user@host:port/database, its password left out (storePassword)",
    })
    .optional(),
  /**
   * The store's password: names a stack config key set with `pulumi config set --secret`, put into the URL where the
   * lease is made. Without it (and without one in the URL), the pg driver reads PGPASSWORD or ~/.pgpass.
   */
  storePassword: z
    .string()
    .regex(CONFIG_KEY, {
      error: "must name a stack config key (letters, digits, _ and -, starting with a letter), e.g. storePassword",
    })
    .optional(),
  leaseHours: z
    .number()
    .positive()
    .max(24 * 30, { error: "must be at most 720 (30 days)" })
    .default(DEFAULT_LEASE_HOURS),
  signInsPerMinute: z.number().positive().optional(),
});

export type PoolConfig = z.output<typeof poolSchema>;

export interface ValidatedPool {
  pool?: PoolConfig;
  /** The config keys the accounts' secretSettings and the store's password name. */
  secretKeys: string[];
  problems: Problem[];
  /** What is allowed but unsafe: a password in plain text in the store's URL. */
  warnings: Problem[];
}

/** The key a pool's store password is best kept under (the fix a warning names). */
const STORE_PASSWORD_KEY = "storePassword";

/**
 * A password in plain text in the store's URL, which sits in the committed stack file: a warning naming the key and
 * the fix (a secret of its own, or the places the pg driver reads one).
 */
function storePasswordWarnings(store: string | undefined, stack: string): Problem[] {
  if (store === undefined || !URL.canParse(store) || new URL(store).password === "") return [];
  return [
    problem(
      [POOL_KEY, "store"],
      `holds the store's password in plain text in the stack file; take it out of the URL and keep it as a secret (\`pulumi config set --secret ${STORE_PASSWORD_KEY} <password> --stack ${stack}\` and ${STORE_PASSWORD_KEY}: ${STORE_PASSWORD_KEY} in the pool), or in PGPASSWORD or ~/.pgpass where the stacks run`,
    ),
  ];
}

/** Validates a pool stack's `multienv` namespace (keys without the prefix), as Pulumi holds it. */
export function validatePoolConfig(values: Record<string, RawConfigValue>, stack: string): ValidatedPool {
  const problems: Problem[] = [];
  const raw = values[POOL_KEY];
  if (raw === undefined)
    return { secretKeys: [], warnings: [], problems: [problem([POOL_KEY], "is required in a pool's stack")] };
  if (raw.secret || raw.value === undefined) {
    return {
      secretKeys: [],
      warnings: [],
      problems: [
        problem(
          [POOL_KEY],
          "holds a secret, so it cannot be read; keep pool plaintext and put each secret in its own key named by an account's secretSettings",
        ),
      ],
    };
  }
  const parsed = poolSchema.safeParse(decodeConfigValue(raw.value), { reportInput: true, error: friendlyMessage });
  if (!parsed.success) {
    const known = (path: readonly PropertyKey[]) =>
      path.length === 0
        ? Object.keys(poolSchema.shape)
        : path[0] === "accounts" && path.length === 2
          ? Object.keys(poolAccountSchema.shape)
          : [];
    problems.push(...issuesToProblems(parsed.error.issues, known, [POOL_KEY]));
  }
  const accounts = parsed.success ? parsed.data.accounts : {};
  const storePassword = parsed.success ? parsed.data.storePassword : undefined;
  const refs = [
    ...Object.entries(accounts).flatMap(([account, a]) =>
      Object.entries(a.secretSettings).map(([setting, key]) => ({
        site: account,
        setting,
        key,
        path: [POOL_KEY, "accounts", account, "secretSettings", setting],
      })),
    ),
    ...(storePassword === undefined
      ? []
      : [{ site: "store", setting: STORE_PASSWORD_KEY, key: storePassword, path: [POOL_KEY, STORE_PASSWORD_KEY] }]),
  ];
  const warnings = parsed.success ? storePasswordWarnings(parsed.data.store, stack) : [];
  const holding = (key: string): SecretKeyHolding =>
    values[key] === undefined ? "unset" : values[key].secret ? "secret" : "plaintext";
  problems.push(...secretReferenceProblems(refs, holding, stack));
  for (const [account, a] of Object.entries(accounts)) {
    for (const setting of Object.keys(a.secretSettings)) {
      if (Object.hasOwn(a.settings, setting))
        problems.push(
          problem(
            [POOL_KEY, "accounts", account, "secretSettings", setting],
            `setting ${setting} is also in settings; a setting is either plain or secret, so remove it from one`,
          ),
        );
    }
  }
  const referenced = new Set(refs.map((r) => r.key));
  for (const key of Object.keys(values).sort()) {
    if (key === POOL_KEY || referenced.has(key)) continue;
    problems.push(
      problem(
        [key],
        `unknown key in a pool's stack${suggestion(key, [POOL_KEY])} (a pool's stack holds pool and the secrets its accounts' secretSettings and its storePassword name)`,
      ),
    );
  }
  const secretKeys = [...referenced].filter((k) => values[k]?.secret === true).sort();
  if (problems.length > 0 || !parsed.success) return { secretKeys, problems, warnings };
  return { pool: parsed.data, secretKeys, problems, warnings };
}

/** Does a stack file hold a pool (`multienv:pool`)? False for an unreadable file. */
export function isPoolFile(path: string): boolean {
  try {
    return Object.hasOwn(readConfigSection(path).values, POOL_KEY);
  } catch {
    return false;
  }
}

/**
 * Reads and validates a pool's stack file without the Pulumi CLI; one ConfigError holding every problem. The pool,
 * and its warnings.
 */
export function readPoolFile(path: string, stack: string): { pool: PoolConfig; warnings: Problem[] } {
  const { values, problems } = readConfigSection(path);
  const validated = validatePoolConfig(values, stack);
  problems.push(...validated.problems);
  if (validated.pool === undefined || problems.length > 0) throw new ConfigError(problems);
  return { pool: validated.pool, warnings: validated.warnings };
}
