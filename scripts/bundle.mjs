// Bundles each service into one file under dist/bundle/, so an image needs only node and
// that file (no npm install during `docker build`, which must work offline).
// A bundle newer than every file it was built from is left as it is.
// Usage: node scripts/bundle.mjs [name...]   (default: every bundle whose entry exists)
import { createRequire } from "node:module";
import { build } from "esbuild";
import fs from "node:fs";
import path from "node:path";

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..");
const { bundleFiles, isFresh } = createRequire(import.meta.url)("./bundle-freshness.cjs");

/** bundle name -> entry point. The names are what the Dockerfiles COPY from dist/bundle/. */
export const BUNDLES = {
  gateway: "src/gateway/main.ts",
  "capture-server": "src/capture-server/main.ts",
  "site-proxy": "src/site-proxy/main.ts",
  "site-proxy-supervisor": "src/site-proxy/supervisor.ts",
  "browser-launcher": "src/browser/main.ts",
  "replay-server": "src/replay-server/main.ts",
  "sample-shop-server": "examples/sites/shop-server/server.ts",
  "sample-shop-frontend": "examples/sites/shop-frontend/server.ts",
  "sample-live-server": "examples/sites/live-server/server.ts",
};

const wanted = process.argv.slice(2);
const names = wanted.length ? wanted : Object.keys(BUNDLES);
let failed = false;
for (const name of names) {
  const entry = BUNDLES[name];
  if (!entry) {
    console.error(`bundle: unknown bundle "${name}"; known: ${Object.keys(BUNDLES).join(", ")}`);
    process.exit(2);
  }
  if (!fs.existsSync(path.join(root, entry))) {
    console.error(`bundle: skipping ${name}: ${entry} does not exist yet`);
    continue;
  }
  const { outfile, inputsFile } = bundleFiles(root, name);
  if (isFresh(root, name)) continue;
  try {
    const result = await build({
      entryPoints: [path.join(root, entry)],
      outfile,
      bundle: true,
      platform: "node",
      target: "node20",
      format: "cjs",
      logLevel: "warning",
      legalComments: "none",
      metafile: true,
    });
    fs.writeFileSync(inputsFile, JSON.stringify(Object.keys(result.metafile.inputs)));
  } catch (e) {
    failed = true;
    // A stale bundle must not be built into an image as if it were current.
    fs.rmSync(outfile, { force: true });
    console.error(`bundle: ${name} (${entry}) failed: ${e.message.split("\n")[0]}`);
  }
}
process.exit(failed ? 1 : 0);
