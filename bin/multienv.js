#!/usr/bin/env node
// Runs the TypeScript entry point through tsx, so the bin works from a checkout without a build step.
require("tsx/cjs");
require("../src/runner/cli.ts");
