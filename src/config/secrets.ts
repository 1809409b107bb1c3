// Secret settings: a website's `secretSettings` map a setting to a stack config key holding a secret, whose value
// reaches that site's server alone. The rule for those references lives here once: the stack file's validation
// asks it how the stack holds each key (set, secret), and the Website component asks it whether it was given a
// value for each; both refuse with the same messages.
import { problem, quote } from "../plan/problems";
import type { Problem } from "../plan/types";
import { CONFIG_KEY, STACK_KEYS } from "./schema";

/** One secret setting of a site and the config key it names. */
export interface SecretReference {
  site: string;
  setting: string;
  key: string;
  /** Where the reference is in the config, when not a site's (`websites.<site>.secretSettings.<setting>`). */
  path?: (string | number)[];
}

/** How the stack holds a key that a secret setting names. */
export type SecretKeyHolding = "secret" | "plaintext" | "unset";

/** A site's secret settings as references, in setting order. */
export function siteSecretReferences(site: string, secretSettings: Record<string, unknown>): SecretReference[] {
  return Object.entries(secretSettings)
    .filter((entry): entry is [string, string] => typeof entry[1] === "string")
    .map(([setting, key]) => ({ site, setting, key }))
    .sort((a, b) => (a.setting < b.setting ? -1 : a.setting > b.setting ? 1 : 0));
}

/**
 * What is wrong with each reference, given how the stack holds its key. A key the schema refuses as a name is left
 * to the schema's message. `stack`, when known, goes into the fix commands.
 */
export function secretReferenceProblems(
  refs: readonly SecretReference[],
  holding: (key: string) => SecretKeyHolding,
  stack?: string,
): Problem[] {
  const problems: Problem[] = [];
  for (const { site, setting, key, path: at } of refs) {
    const path = at ?? ["websites", site, "secretSettings", setting];
    const fix = (name: string) =>
      `pulumi config set --secret ${name} <value>${stack === undefined ? "" : ` --stack ${stack}`}`;
    if (!CONFIG_KEY.test(key)) continue;
    if ((STACK_KEYS as readonly string[]).includes(key)) {
      problems.push(
        problem(
          path,
          `names ${quote(key)}, a stack key, not a secret; name a key of its own, set with \`${fix(`${setting}Secret`)}\``,
        ),
      );
      continue;
    }
    const held = holding(key);
    if (held === "unset") {
      problems.push(problem(path, `names config key ${key}, which is not set; set it with \`${fix(key)}\``));
    } else if (held === "plaintext") {
      problems.push(
        problem(
          path,
          `names config key ${key}, which holds a plaintext value; a secret setting must be a secret: \`${fix(key)}\``,
        ),
      );
    }
  }
  return problems;
}
