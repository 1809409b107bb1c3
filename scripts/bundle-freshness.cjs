// Whether a bundle is fresh: newer than every file it was built from (the inputs esbuild reported, which
// scripts/bundle.mjs keeps beside it as <name>.inputs.json). Shared by the bundler and the Pulumi program, so a
// deploy that changed nothing neither bundles nor starts the bundler.
const fs = require("node:fs");
const path = require("node:path");

/** The bundle's output file and its inputs list, under `root`. */
function bundleFiles(root, name) {
  return {
    outfile: path.join(root, "dist/bundle", `${name}.js`),
    inputsFile: path.join(root, "dist/bundle", `${name}.inputs.json`),
  };
}

function isFresh(root, name) {
  const { outfile, inputsFile } = bundleFiles(root, name);
  try {
    const built = fs.statSync(outfile).mtimeMs;
    const inputs = JSON.parse(fs.readFileSync(inputsFile, "utf8"));
    return inputs.every((input) => fs.statSync(path.join(root, input)).mtimeMs <= built);
  } catch {
    return false;
  }
}

module.exports = { bundleFiles, isFresh };
