// Each service (gateway, site proxy, browser) reads one JSON config from an environment variable. This parses
// it with the service's schema and reports every problem at once, on one line (a service's exit message is one
// line), each naming its field as the stack config's problems do:
// `MULTIENV_GATEWAY_CONFIG.sites.shop.server: expected an http:// URL; MULTIENV_GATEWAY_CONFIG.listen.port: ...`.
import type { z } from "zod";
import { MIN_TOKEN_LENGTH, tokenProblem } from "./auth";
import { configPath, friendlyMessage, issueMessages } from "./config-issues";

/** Bad service config or environment: the message is one line naming each field and how to fix it. */
export class ServiceConfigError extends Error {
  override name = "ServiceConfigError";
}

/** `VARIABLE.a.b[0]`: the field a message is about, starting at the variable that holds the config. */
function serviceConfigField(variable: string, path: readonly (string | number)[]): string {
  const rest = configPath(path);
  if (rest === "") return variable;
  return rest.startsWith("[") ? variable + rest : `${variable}.${rest}`;
}

type Def = {
  type: string;
  innerType?: z.ZodType;
  in?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  valueType?: z.ZodType;
  element?: z.ZodType;
};

/** The keys an object of `schema` may have at `path`, for "did you mean" on an unknown key. */
function keysAt(schema: z.ZodType, path: readonly PropertyKey[]): readonly string[] {
  let at: z.ZodType | undefined = schema;
  let rest = [...path];
  while (at !== undefined) {
    const def: Def = (at as unknown as { _zod: { def: Def } })._zod.def;
    if (def.innerType) at = def.innerType;
    else if (def.type === "pipe") at = def.in;
    else if (def.type === "object" && rest.length === 0) return Object.keys(def.shape ?? {});
    else if (def.type === "object") [at, rest] = [def.shape?.[String(rest[0])], rest.slice(1)];
    else if (def.type === "record") [at, rest] = [def.valueType, rest.slice(1)];
    else if (def.type === "array") [at, rest] = [def.element, rest.slice(1)];
    else return [];
  }
  return [];
}

/** `raw` (already JSON-decoded) checked against `schema`; throws ServiceConfigError naming every problem. */
export function checkServiceConfig<S extends z.ZodType>(variable: string, raw: unknown, schema: S): z.output<S> {
  const result = schema.safeParse(raw, { reportInput: true, error: friendlyMessage });
  if (result.success) return result.data;
  const messages = issueMessages(result.error.issues, (path) => keysAt(schema, path));
  throw new ServiceConfigError(
    messages.map(({ path, message }) => `${serviceConfigField(variable, path)}: ${message}`).join("; "),
  );
}

/**
 * The config in `text` (the variable's value), checked against `schema`. `expected` says what the variable should
 * hold, for the messages about a missing or non-JSON value ("the gateway's JSON config").
 */
export function parseServiceConfig<S extends z.ZodType>(
  variable: string,
  text: string | undefined,
  schema: S,
  expected: string,
): z.output<S> {
  if (text === undefined || text.trim() === "")
    throw new ServiceConfigError(`${variable}: is not set; set it to ${expected}`);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new ServiceConfigError(`${variable}: is not JSON (${(error as Error).message}); set it to ${expected}`);
  }
  return checkServiceConfig(variable, raw, schema);
}

/**
 * A token from the environment (see `tokenProblem`); throws ServiceConfigError naming the variable, what is wrong
 * and what to set it to.
 */
export function tokenFromEnv(variable: string, env: NodeJS.ProcessEnv, expected: string): string {
  const token = env[variable];
  const problem = tokenProblem(token);
  if (problem !== undefined)
    throw new ServiceConfigError(
      `${variable}: ${problem}; set it to ${expected} (at least ${MIN_TOKEN_LENGTH} characters: letters, digits and - . _ ~ + /)`,
    );
  return token!;
}
