#!/usr/bin/env node
// Runs the TypeScript entry point through tsx, so the bin works from a checkout without a build step.
// The big plain-JS dependencies are loaded first: once tsx's hooks are in place it inspects every file a
// require loads, which costs about half a second of CPU across @pulumi/* on each run (`multienv check` included).
require("@pulumi/pulumi");
require("@pulumi/aws");
require("tsx/cjs");
require("../src/runner/cli.ts");
