// Builds StackConfigs the way users write them: through the schema, so defaults are the real ones.
// Site images are required (the task's own); fixtures give every site one unless a test sets its own,
// so each test states only what it is about. `bare` skips that, for the tests of the image rule itself.
import { stackConfigSchema } from "../../src/config/schema";
import type { StackConfig } from "../../src/plan/types";

type Input = Record<string, unknown>;

function withImages(site: Input): Input {
  const server = { image: "site-server:test", ...(site.server as Input | undefined) };
  if (site.live === true) return { ...site, server };
  const frontend = { image: "site-frontend:test", ...(site.frontend as Input | undefined) };
  return { ...site, server, frontend };
}

export function stackConfig(input: Input, options: { bare?: boolean } = {}): StackConfig {
  const websites = input.websites as Record<string, Input> | undefined;
  if (options.bare || websites === undefined) return stackConfigSchema.parse(input);
  const filled = Object.fromEntries(Object.entries(websites).map(([name, site]) => [name, withImages(site)]));
  return stackConfigSchema.parse({ ...input, websites: filled });
}

export function websites(input: Record<string, Input>, options: { bare?: boolean } = {}): StackConfig["websites"] {
  return stackConfig({ websites: input }, options).websites;
}
