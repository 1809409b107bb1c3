// Builds StackConfigs the way users write them: through the schema, so defaults are the real ones.
import { stackConfigSchema } from "../../src/config/schema";
import type { StackConfig } from "../../src/plan/types";

export function stackConfig(input: Record<string, unknown>): StackConfig {
  return stackConfigSchema.parse(input);
}

export function websites(input: Record<string, Record<string, unknown>>): StackConfig["websites"] {
  return stackConfig({ websites: input }).websites;
}
