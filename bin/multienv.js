#!/usr/bin/env node
// Runs the TypeScript entry point through tsx, so the bin works from a checkout without a build step.
// A command that runs Pulumi's SDK has @pulumi/* loaded first: once tsx's hooks are in place they inspect every file
// a require loads, which costs about half a second of CPU across @pulumi/* (`multienv check` included). A help request
// and the commands that never touch the SDK skip it: the CLI itself loads the SDK only inside a command's action.
const args = process.argv.slice(2);
const helpRequest = args.length === 0 || args[0] === "help" || args.includes("--help") || args.includes("-h");
const withoutSdk = args[0] === "sweep" || (args[0] === "collect" && args.includes("--from-env"));
if (!helpRequest && !withoutSdk) {
  require("@pulumi/pulumi");
  require("@pulumi/aws");
}
require("tsx/cjs");
require("../src/runner/cli.ts");
