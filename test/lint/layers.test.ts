// The layers of docs/layout.md are the lint's, not only the docs': ESLint, with the repository's own config, refuses
// an import that goes up the order (or across a tier), whether an import or export declaration, a type import, a
// require() or an import(), and names the rule's layers in its message. Each case lints source text under a path it
// would have in the repository, so no file is written.
import { resolve } from "node:path";
import { ESLint } from "eslint";
import { describe, expect, it } from "vitest";

const ROOT = resolve(__dirname, "..", "..");
const eslint = new ESLint({ cwd: ROOT });

/** The layer messages ESLint gives `source` as if it were the file at `path`. */
async function layerMessages(path: string, source: string): Promise<string[]> {
  const [result] = await eslint.lintText(source, { filePath: resolve(ROOT, path) });
  return result.messages.filter((m) => m.message.includes("layers (docs/layout.md)")).map((m) => m.message);
}

describe("an import against the layers' order fails the lint", () => {
  it.each([
    ["src/protocol/fixture.ts", 'import type { Plan } from "../plan/types";\nexport type P = Plan;', "src/plan"],
    ["src/engines/fixture.ts", 'export { LocalCommand } from "../providers/resources";', "src/providers"],
    ["src/runner/stack/fixture.ts", 'export { writeFileAtomic } from "../evidence/artifacts";', "src/runner/evidence"],
    [
      "src/runner/evidence/fixture.ts",
      'export { runtimeOf } from "../targets/runtimes";\nexport * from "../index";',
      "src/runner/index.ts",
    ],
    ["src/plan/fixture.ts", 'export const runner = require("../runner/index");', "src/runner/index.ts"],
    ["src/runner/stack/fixture.ts", 'export const load = () => import("..");', "src/runner/index.ts"],
    ["components/docker/fixture.ts", 'export { MultiEnv } from "../multiEnv";', "components (MultiEnv)"],
    ["components/fixture-env-wide.ts", 'export { MultiEnv } from "./multiEnv";', "no layer"],
    ["src/gateway/fixture.ts", 'export { plan } from "../plan";', "src/plan"],
    ["src/site-proxy/fixture.ts", 'export { startGateway } from "../gateway/main";', "src/gateway"],
    ["src/newfolder/fixture.ts", 'export { LABELS } from "../protocol/labels";', "no layer"],
    // No service imports another's module: what they share is the service kit.
    ["src/capture-server/fixture.ts", 'export * from "../gateway/main";', "src/gateway"],
    ["src/replay-server/fixture.ts", 'export { route } from "../gateway/routes";', "src/gateway"],
    ["src/service-kit/fixture.ts", 'export { route } from "../gateway/routes";', "src/gateway"],
    // The targets: the parts on a Docker engine are below every target, no target imports another's folder (ec2
    // alone builds on the hosts part), and only components/targets.ts names them all.
    ["components/engine/fixture.ts", 'export { DockerTarget } from "../docker/target";', "components/docker"],
    [
      "components/engine/fixture.ts",
      'import type { EnvTarget } from "../targets";\nexport type E = EnvTarget;',
      "components/targets.ts",
    ],
    ["components/docker/fixture.ts", 'export { RemoteEngines } from "../hosts/remoteEngines";', "components/hosts"],
    ["components/hosts/fixture.ts", 'export { Ec2Host } from "../ec2/host";', "components/ec2"],
    ["components/kubernetes/fixture.ts", 'export { DockerTarget } from "../docker/target";', "components/docker"],
    ["components/ec2/fixture.ts", 'export { envTargetFor } from "../targets";', "components/targets.ts"],
    ["components/ec2/fixture.ts", 'export { DockerTarget } from "../docker/target";', "another target's"],
    ["components/ec2/fixture.ts", 'export { deployOnCluster } from "../kubernetes/deploy";', "components/kubernetes"],
    ["src/runner/targets/ec2/fixture.ts", 'export * from "../../lifecycle/down";', "src/runner/lifecycle"],
    [
      "src/runner/targets/kubernetes/fixture.ts",
      'export type { ContainerState } from "../docker/containers";',
      "src/runner/targets/docker",
    ],
    [
      "src/runner/targets/docker/fixture.ts",
      'export { runtimeOf } from "../runtimes";',
      "src/runner/targets/runtimes.ts",
    ],
  ])("%s: %s", async (path, source, refused) => {
    const messages = await layerMessages(path, source);
    expect(messages.length).toBeGreaterThan(0);
    expect(messages.join("\n")).toContain(refused);
  });

  it.each([
    ["src/protocol/fixture.ts", 'export { LABELS } from "./labels";'],
    ["src/plan/fixture.ts", 'export { LABELS } from "../protocol/labels";'],
    ["src/capture-server/fixture.ts", 'export * from "../service-kit/log";\nexport * from "../protocol/labels";'],
    ["src/gateway/fixture.ts", 'export * from "../service-kit/reply";'],
    ["src/runner/commands/fixture.ts", 'export const load = () => require("../index");\nexport * from "../errors";'],
    ["src/runner/stack/fixture.ts", 'export * from "../errors";\nexport * from "../targets/runtimes";'],
    ["components/docker/fixture.ts", 'export * from "../deployed";\nexport * from "../../src/plan/types";'],
    ["components/docker/fixture.ts", 'export { DockerEngine } from "../engine/engine";'],
    [
      "components/ec2/fixture.ts",
      'export { RemoteTarget } from "../hosts/remote";\nexport * from "../engine/envTarget";',
    ],
    ["components/targets.ts", 'export * from "./ec2/target";\nexport * from "./kubernetes/deploy";'],
    ["src/runner/targets/kubernetes/fixture.ts", 'export type { EnvRuntime } from "../env-runtime";'],
    ["src/runner/cli.ts", 'export const load = () => require("./commands/up");'],
  ])("%s may: %s", async (path, source) => {
    expect(await layerMessages(path, source)).toEqual([]);
  });
});
