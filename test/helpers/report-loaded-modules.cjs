// Preloaded into a process under test (`node --require <this file> ...`): when the process exits, writes the path of
// every CommonJS module it loaded, one a line, to the file REPORT_LOADED_MODULES names. Tests use it to assert what a
// command does not load (Pulumi's SDK for `--help`).
const { writeFileSync } = require("node:fs");

const out = process.env.REPORT_LOADED_MODULES;
if (out) process.on("exit", () => writeFileSync(out, Object.keys(require.cache).join("\n") + "\n"));
