// A stack file read straight from stacks/Pulumi.<stack>.yaml, with no Pulumi CLI and without Pulumi's SDK (so the
// runner can check a file before it loads either): a `secure:` value counts as a secret without being decrypted.
import { readFileSync } from "node:fs";
import { basename } from "node:path";
import { parseDocument, visit } from "yaml";
import { CONFIG_NAMESPACE, problem } from "../plan/problems";
import type { Problem, StackConfig } from "../plan/types";
import { ConfigError } from "./errors";
import { namespaceProblems, type RawConfigValue, validateStackConfig } from "./validate";

/**
 * A stack file that is not one at all (unreadable, not YAML, not a mapping of config keys): Pulumi cannot read it
 * either, so no command on the stack can go on. A ConfigError like any other, for callers that need not tell.
 */
export class StackFileError extends ConfigError {
  constructor(problems: Problem[]) {
    super(problems);
    this.name = "StackFileError";
  }
}

/** The line (1-based) of offset `pos` in `text`. */
function lineAt(text: string, pos: number): number {
  return text.slice(0, pos).split("\n").length;
}

/** How a secret's value is shown wherever it is not decrypted. */
export const SECRET_MARKER = "[secret]";

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
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new StackFileError([
      problem("", `cannot read ${path}: ${code === "ENOENT" ? "no such file" : (error as Error).message}`),
    ]);
  }
  const document = parseDocument(text, { prettyErrors: false });
  if (document.errors.length > 0) {
    throw new StackFileError(
      document.errors.map((e) =>
        problem("", `${path} line ${lineAt(text, e.pos[0])}: not valid YAML: ${e.message.split("\n")[0]}`),
      ),
    );
  }
  let top: unknown;
  try {
    top = document.toJS() ?? {};
  } catch (error) {
    // The parser's guard against a "billion laughs" file (aliases of aliases): a value far larger than its text.
    // It names no position, so the line is the first alias's.
    let aliasAt: number | undefined;
    visit(document, {
      Alias(_, node) {
        aliasAt = node.range?.[0];
        return visit.BREAK;
      },
    });
    const where = aliasAt === undefined ? path : `${path} line ${lineAt(text, aliasAt)}`;
    const excessive = /alias/i.test((error as Error).message);
    throw new StackFileError([
      problem(
        "",
        excessive
          ? `${where}: not a stack file: its YAML aliases (*name) expand to a value far larger than the file; write each value out instead of aliasing aliases`
          : `${where}: not valid YAML: ${(error as Error).message.split("\n")[0]}`,
      ),
    ]);
  }
  if (typeof top !== "object" || Array.isArray(top) || top === null) {
    throw new StackFileError([problem("", `${path}: a stack file is a YAML mapping with a config: section`)]);
  }
  const section: unknown = (top as Record<string, unknown>).config ?? {};
  if (typeof section !== "object" || Array.isArray(section) || section === null) {
    throw new StackFileError([problem("", `${path}: config: must be a mapping of namespace:key to values`)]);
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
  const validated = validateStackConfig(values, stack);
  problems.push(...namespaceProblems(Object.keys(section)), ...validated.problems);
  if (validated.config === undefined || problems.length > 0) throw new ConfigError(problems);
  const secrets = Object.fromEntries(validated.secretKeys.map((k) => [k, SECRET_MARKER]));
  return { stack, config: validated.config, secrets, rawConfig, secretKeys: secretKeys.sort() };
}
