// The two ways a stack config is read, sharing one validator (validate.ts):
// - loadStackConfig: inside the Pulumi program, from Pulumi config (secrets as pulumi secrets);
// - readStackFile: for `multienv check`, straight from stacks/Pulumi.<stack>.yaml, with no Pulumi CLI,
//   counting a `secure:` value as a secret without decrypting it.
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { parseDocument } from "yaml";
import { CONFIG_NAMESPACE, problem } from "../plan/problems";
import type { Problem, StackConfig } from "../plan/types";
import { ConfigError } from "./errors";
import { namespaceProblems, type RawConfigValue, validateStackConfig } from "./validate";

export { ConfigError } from "./errors";

/** How a secret's value is shown wherever it is not decrypted. */
export const SECRET_MARKER = "[secret]";

export interface LoadedStackConfig {
  config: StackConfig;
  /** Config key (without namespace) -> its secret value, for each key a website's secretSettings names. */
  secrets: Record<string, pulumi.Output<string>>;
}

/** `pulumi.runtime.isConfigSecret` is marked internal in the SDK's types, though it is how the SDK itself tells. */
export function isConfigSecret(fullKey: string): boolean {
  const runtime = pulumi.runtime as unknown as { isConfigSecret?: (k: string) => boolean };
  if (typeof runtime.isConfigSecret !== "function") {
    throw new Error(
      "@pulumi/pulumi no longer exports runtime.isConfigSecret; multienv cannot tell a secret from plaintext",
    );
  }
  return runtime.isConfigSecret(fullKey);
}

/**
 * Reads and validates the `multienv` namespace of the running stack's config. Throws one ConfigError
 * holding every problem. Secret values are read only as secrets (`requireSecret`).
 */
export function loadStackConfig(pulumiConfig: pulumi.Config = new pulumi.Config(CONFIG_NAMESPACE)): LoadedStackConfig {
  const prefix = `${pulumiConfig.name}:`;
  const values: Record<string, RawConfigValue> = {};
  const all = pulumi.runtime.allConfig();
  for (const [fullKey, value] of Object.entries(all)) {
    if (!fullKey.startsWith(prefix)) continue;
    const secret = isConfigSecret(fullKey);
    values[fullKey.slice(prefix.length)] = secret ? { secret } : { secret, value };
  }
  const validated = validateStackConfig(values, pulumi.getStack());
  const problems = [...namespaceProblems(Object.keys(all)), ...validated.problems];
  if (validated.config === undefined || problems.length > 0) throw new ConfigError(problems);
  const secrets: Record<string, pulumi.Output<string>> = {};
  for (const key of validated.secretKeys) secrets[key] = pulumiConfig.requireSecret(key);
  return { config: validated.config, secrets };
}

export interface StackFile {
  stack: string;
  config: StackConfig;
  /** Config key (without namespace) -> SECRET_MARKER, for each key a website's secretSettings names. */
  secrets: Record<string, string>;
  /**
   * The file's whole `config:` section as Pulumi hands it to a program ("namespace:key" -> string, structured
   * values as JSON), secure values replaced by SECRET_MARKER: with `secretKeys`, what
   * `pulumi.runtime.setAllConfig(rawConfig, secretKeys)` takes to run the program under mocks.
   */
  rawConfig: Record<string, string>;
  /** Full keys ("namespace:key") whose value is, or holds, a `secure:` value. */
  secretKeys: string[];
}

function isSecure(value: unknown): boolean {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    Object.keys(value).length === 1 &&
    "secure" in value
  );
}

function holdsSecure(value: unknown): boolean {
  if (isSecure(value)) return true;
  if (typeof value === "object" && value !== null) return Object.values(value).some(holdsSecure);
  return false;
}

/** A structured value with each `secure:` replaced by the marker, as a program sees it once decrypted. */
function masked(value: unknown): unknown {
  if (isSecure(value)) return SECRET_MARKER;
  if (Array.isArray(value)) return value.map(masked);
  if (typeof value === "object" && value !== null)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, masked(v)]));
  return value;
}

/** Pulumi's string form of a config value. */
function configString(value: unknown): string {
  if (value === null || value === undefined) return "";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** The stack name of `stacks/Pulumi.<stack>.yaml`. */
export function stackNameOfFile(path: string): string {
  const match = /^Pulumi\.(.+)\.ya?ml$/.exec(basename(path));
  return match ? match[1] : basename(path).replace(/\.ya?ml$/, "");
}

/**
 * Reads and validates a stack file without the Pulumi CLI. Throws one ConfigError holding every problem
 * (including an unreadable file or bad YAML).
 */
export function readStackFile(path: string, stack: string = stackNameOfFile(path)): StackFile {
  const { values, rawConfig, secretKeys, problems } = readConfigSection(path);
  const validated = validateStackConfig(values, stack);
  problems.push(...validated.problems);
  if (validated.config === undefined || problems.length > 0) throw new ConfigError(problems);
  const secrets = Object.fromEntries(validated.secretKeys.map((k) => [k, SECRET_MARKER]));
  return { stack, config: validated.config, secrets, rawConfig, secretKeys: secretKeys.sort() };
}

/**
 * A stack file's `config:` section: the `multienv` namespace's keys as Pulumi holds them, the whole section as a
 * program gets it, the secret keys, and the problems of the file itself. Throws a ConfigError for an unreadable file
 * or bad YAML.
 */
export function readConfigSection(path: string): {
  values: Record<string, RawConfigValue>;
  rawConfig: Record<string, string>;
  secretKeys: string[];
  problems: Problem[];
} {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new ConfigError([
      problem("", `cannot read ${path}: ${code === "ENOENT" ? "no such file" : (error as Error).message}`),
    ]);
  }
  const document = parseDocument(text, { prettyErrors: false });
  if (document.errors.length > 0) {
    throw new ConfigError(
      document.errors.map((e) => {
        const line = text.slice(0, e.pos[0]).split("\n").length;
        return problem("", `${path} line ${line}: not valid YAML: ${e.message.split("\n")[0]}`);
      }),
    );
  }
  const top: unknown = document.toJS() ?? {};
  if (typeof top !== "object" || Array.isArray(top) || top === null) {
    throw new ConfigError([problem("", `${path}: a stack file is a YAML mapping with a config: section`)]);
  }
  const section: unknown = (top as Record<string, unknown>).config ?? {};
  if (typeof section !== "object" || Array.isArray(section) || section === null) {
    throw new ConfigError([problem("", `${path}: config: must be a mapping of namespace:key to values`)]);
  }

  const problems: Problem[] = [];
  const rawConfig: Record<string, string> = {};
  const secretKeys: string[] = [];
  const values: Record<string, RawConfigValue> = {};
  const prefix = `${CONFIG_NAMESPACE}:`;
  for (const [fullKey, value] of Object.entries(section as Record<string, unknown>)) {
    if (!fullKey.includes(":")) {
      problems.push(problem([fullKey], `a config key needs its namespace; write ${prefix}${fullKey}`));
      continue;
    }
    const secret = holdsSecure(value);
    rawConfig[fullKey] = configString(masked(value));
    if (secret) secretKeys.push(fullKey);
    if (fullKey.startsWith(prefix))
      values[fullKey.slice(prefix.length)] = secret ? { secret } : { secret, value: rawConfig[fullKey] };
  }
  problems.push(...namespaceProblems(Object.keys(section)));
  return { values, rawConfig, secretKeys, problems };
}
