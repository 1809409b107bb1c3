// The e2e tier runs the real Pulumi engine: the CLI and language host on PATH (installed, or built by
// scripts/pulumi-toolchain.sh), a file state backend of its own in a temp dir, a passphrase for its secrets,
// and no plugin ever downloaded (nothing outside is reachable, and the project needs none).
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { builtToolchainDir } from "../../src/runner/stack/toolchain";

const BUILT = path.join(builtToolchainDir(), "bin");
const onPath = (process.env.PATH ?? "").split(":").some((dir) => dir !== "" && existsSync(path.join(dir, "pulumi")));
if (!onPath) {
  if (!existsSync(path.join(BUILT, "pulumi"))) {
    throw new Error(
      "the e2e tier needs the Pulumi CLI: install it, or build it with `bash scripts/pulumi-toolchain.sh` (bash .ci/run does)",
    );
  }
  process.env.PATH = `${BUILT}:${process.env.PATH}`;
}
process.env.PULUMI_BACKEND_URL = `file://${mkdtempSync(path.join(tmpdir(), "multienv-e2e-state-"))}`;
process.env.PULUMI_CONFIG_PASSPHRASE = "multienv-e2e";
process.env.PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION = "true";
process.env.PULUMI_SKIP_UPDATE_CHECK = "true";
