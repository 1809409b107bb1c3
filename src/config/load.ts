// The two ways a stack config is read, sharing one validator (validate.ts):
// - loadStackConfig: inside the Pulumi program, from Pulumi config (secrets as pulumi secrets);
// - readStackFile (stack-file.ts): for `multienv check` and the runner, straight from stacks/Pulumi.<stack>.yaml.
import * as pulumi from "@pulumi/pulumi";
import { CONFIG_NAMESPACE } from "../plan/problems";
import type { StackConfig } from "../plan/types";
import { ConfigError } from "./errors";
import { namespaceProblems, type RawConfigValue, validateStackConfig } from "./validate";

export { ConfigError } from "./errors";

export interface LoadedStackConfig {
  config: StackConfig;
  /** Config key (without namespace) -> its secret value, for each key a website's secretSettings names. */
  secrets: Record<string, pulumi.Output<string>>;
}

/** `pulumi.runtime.isConfigSecret` is marked internal in the SDK's types, though it is how the SDK itself tells. */
function isConfigSecret(fullKey: string): boolean {
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
