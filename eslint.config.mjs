// ESLint with typescript-eslint's recommended rules: the linter the TypeScript field uses (typescript-eslint is
// what the TypeScript team points to since TSLint), over every TypeScript and JavaScript file in the repository.
// Layout is Prettier's (.prettierrc.json; `prettier --check` is part of `npm run lint`): eslint-config-prettier
// turns off every rule Prettier decides, and the one layout rule left is the line length of what Prettier does
// not wrap (comments), at Prettier's width.
import js from "@eslint/js";
import stylistic from "@stylistic/eslint-plugin";
import prettier from "eslint-config-prettier";
import globals from "globals";
import tseslint from "typescript-eslint";
import { readdirSync } from "node:fs";
import { dirname, posix } from "node:path";
import { fileURLToPath } from "node:url";

// The layers of docs/layout.md, bottom first: a tier imports only the tiers below it, never its own nor one above
// (`only` narrows a layer to the layers it names, `never` takes the layers it names away). A member is a folder (with
// everything under it) or one file. A folder under src/, components/ or policies/ that is in no layer has every
// relative import refused, so a new folder takes its place here (and in docs/layout.md) before it imports anything.
const LAYERS = [
  [{ name: "src/protocol", members: ["src/protocol"], only: [] }],
  // What the services share beyond the wire: the capture listing and health, framing, answers, the log, path names.
  [{ name: "src/service-kit", members: ["src/service-kit"], only: ["src/protocol"] }],
  [
    { name: "src/gateway", members: ["src/gateway"], only: ["src/protocol", "src/service-kit"] },
    { name: "src/site-proxy", members: ["src/site-proxy"], only: ["src/protocol"] },
    { name: "src/browser", members: ["src/browser"], only: ["src/protocol"] },
    { name: "src/capture-server", members: ["src/capture-server"], only: ["src/protocol", "src/service-kit"] },
    { name: "src/replay-server", members: ["src/replay-server"], only: ["src/protocol", "src/service-kit"] },
  ],
  [
    { name: "src/plan", members: ["src/plan"], only: ["src/protocol"] },
    { name: "src/machine-cache.ts", members: ["src/machine-cache.ts"], only: [] },
  ],
  // The lease store, below the config: a pool's config puts the store's password into its URL.
  [{ name: "src/accounts", members: ["src/accounts"] }],
  [
    { name: "src/config", members: ["src/config"] },
    { name: "src/errors.ts", members: ["src/errors.ts"], only: [] },
  ],
  [{ name: "src/engines", members: ["src/engines"] }],
  [{ name: "src/providers", members: ["src/providers"] }],
  [
    { name: "policies", members: ["policies"] },
    { name: "components/deployed.ts", members: ["components/deployed.ts"] },
  ],
  [
    {
      name: "components (env-wide)",
      members: ["components/captureCollector.ts", "components/controlToken.ts", "components/selfTest.ts"],
    },
    { name: "components/accounts", members: ["components/accounts"] },
  ],
  // The parts on a Docker engine, whichever target gives the engine, and what they need of a target (EnvTarget).
  [{ name: "components/engine", members: ["components/engine"] }],
  // A folder per target; none imports another's but ec2, which hands the VMs it creates to the hosts target's part.
  [
    { name: "components/docker", members: ["components/docker"] },
    { name: "components/hosts", members: ["components/hosts"] },
    { name: "components/kubernetes", members: ["components/kubernetes"] },
  ],
  [{ name: "components/ec2", members: ["components/ec2"], never: ["components/docker", "components/kubernetes"] }],
  // The one place that names every target.
  [{ name: "components/targets.ts", members: ["components/targets.ts"] }],
  [{ name: "components (MultiEnv)", members: ["components/multiEnv.ts", "components/index.ts"] }],
  [{ name: "src/program-pools.ts", members: ["src/program-pools.ts"] }],
  [{ name: "the program", members: ["src/program.ts", "index.ts"] }],
  // The runner, on top of all of the above; inside it, the same rule between its folders.
  [{ name: "src/runner (errors, terminal text)", members: ["src/runner/errors.ts", "src/runner/terminal-text.ts"] }],
  // What the runner does per target, a folder each over what they share (EnvRuntime, a workload's state), and the
  // runtime picked from a stack's state above them.
  [{ name: "src/runner/targets/env-runtime.ts", members: ["src/runner/targets/env-runtime.ts"] }],
  [
    { name: "src/runner/targets/docker", members: ["src/runner/targets/docker"] },
    { name: "src/runner/targets/hosts", members: ["src/runner/targets/hosts"] },
    { name: "src/runner/targets/ec2", members: ["src/runner/targets/ec2"] },
    { name: "src/runner/targets/kubernetes", members: ["src/runner/targets/kubernetes"] },
  ],
  [{ name: "src/runner/targets/runtimes.ts", members: ["src/runner/targets/runtimes.ts"] }],
  [{ name: "src/runner/stack", members: ["src/runner/stack"] }],
  [
    { name: "src/runner/check", members: ["src/runner/check"] },
    { name: "src/runner/evidence", members: ["src/runner/evidence"] },
  ],
  [{ name: "src/runner/lifecycle", members: ["src/runner/lifecycle"] }],
  [{ name: "src/runner/operator", members: ["src/runner/operator"] }],
  [{ name: "src/runner/index.ts", members: ["src/runner/index.ts", "src/runner/options.ts"] }],
  // Warm pools deploy, reset and destroy their members through the runner's library.
  [{ name: "src/runner/pools", members: ["src/runner/pools"] }],
  [{ name: "src/runner/commands", members: ["src/runner/commands"] }],
  [{ name: "src/runner/cli.ts", members: ["src/runner/cli.ts"] }],
  [{ name: "the package's entry", members: ["src/index.ts"] }],
];
const LAYERED_ROOTS = ["src", "components", "policies"];
const ROOT = dirname(fileURLToPath(import.meta.url));

/** The layer a repository path (a directory or a .ts file) belongs to: its longest member. */
function layerOf(path) {
  let found;
  for (const tier of LAYERS.keys()) {
    for (const layer of LAYERS[tier]) {
      for (const member of layer.members) {
        if ((path === member || path.startsWith(`${member}/`)) && (!found || member.length > found.member.length)) {
          found = { layer, tier, member };
        }
      }
    }
  }
  return found;
}

/** A regex source matching the import specifiers, written from `fromDir`, that reach `member`. */
function specifierRegex(fromDir, member) {
  const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const file = member.endsWith(".ts");
  const target = file ? member.replace(/\.ts$/, "") : member;
  let relative = posix.relative(fromDir, target);
  if (!relative.startsWith(".")) relative = `./${relative}`;
  if (!file) return `^${escape(relative)}(/|$)`;
  if (posix.basename(target) !== "index") return `^${escape(relative)}(\\.[cm]?[jt]s)?$`;
  let folder = posix.relative(fromDir, posix.dirname(target)) || ".";
  if (!folder.startsWith(".")) folder = `./${folder}`;
  return `^(${escape(relative)}(\\.[cm]?[jt]s)?|${escape(folder)}/?)$`;
}

/**
 * The ESLint rules of one directory's files: no-restricted-imports for import and export declarations (type
 * imports included), no-restricted-syntax for require() and import(), which the CLI uses to load lazily.
 */
function rulesFor(fromDir, refusals) {
  const syntax = refusals.flatMap(({ regex, message }) => {
    // esquery reads a regex up to its first "/": the slashes are written as \x2F.
    const pattern = `/${regex.replaceAll("/", "\\x2F")}/`;
    return [
      { selector: `CallExpression[callee.name='require'][arguments.0.value=${pattern}]`, message },
      { selector: `ImportExpression[source.value=${pattern}]`, message },
    ];
  });
  return {
    "no-restricted-imports": ["error", { patterns: refusals.map(({ regex, message }) => ({ regex, message })) }],
    "no-restricted-syntax": syntax.length ? ["error", ...syntax] : "off",
  };
}

/** What a file of `layer` (in `tier`), in `fromDir`, may not import: every member of its tier's layers and above. */
function refusalsOf(fromDir, layer, tier) {
  const allowed = layer.only ? new Set([layer.name, ...layer.only]) : undefined;
  const refusals = [];
  for (const [otherTier, layers] of LAYERS.entries()) {
    for (const other of layers) {
      if (other === layer) continue;
      const never = layer.never?.includes(other.name) ?? false;
      const refused = otherTier >= tier || (allowed && !allowed.has(other.name)) || never;
      if (!refused) continue;
      const why =
        otherTier >= tier
          ? "is not below it"
          : never
            ? "is another target's"
            : `is not among the layers it imports (${layer.only.join(", ") || "none"})`;
      const message = `layers (docs/layout.md): ${layer.name} never imports ${other.name}, which ${why}`;
      for (const member of other.members) refusals.push({ regex: specifierRegex(fromDir, member), message });
    }
  }
  return refusals;
}

/**
 * One config block per directory in a layer, and per file in a layer of its own; first, for any file in no layer
 * (a new folder, even one not yet on disk), every relative import refused.
 */
function layerRules() {
  const message =
    "layers (docs/layout.md): this folder is in no layer; give it its place in eslint.config.mjs's LAYERS";
  const blocks = [
    { files: LAYERED_ROOTS.map((root) => `${root}/**/*.ts`), rules: rulesFor(".", [{ regex: "^\\.", message }]) },
  ];
  const walk = (dir) => {
    const entries = readdirSync(posix.join(ROOT, dir), { withFileTypes: true });
    const dirLayer = layerOf(dir);
    if (dirLayer) {
      blocks.push({ files: [`${dir}/*.ts`], rules: rulesFor(dir, refusalsOf(dir, dirLayer.layer, dirLayer.tier)) });
    } else {
      for (const entry of entries.filter((e) => e.isFile() && e.name.endsWith(".ts"))) {
        const path = posix.join(dir, entry.name);
        const fileLayer = layerOf(path);
        if (fileLayer) {
          blocks.push({ files: [path], rules: rulesFor(dir, refusalsOf(dir, fileLayer.layer, fileLayer.tier)) });
        }
      }
    }
    for (const entry of entries.filter((e) => e.isDirectory())) walk(posix.join(dir, entry.name));
  };
  LAYERED_ROOTS.forEach(walk);
  const top = layerOf("index.ts");
  blocks.push({ files: ["index.ts"], rules: rulesFor(".", refusalsOf(".", top.layer, top.tier)) });
  return blocks;
}

export default tseslint.config(
  { ignores: ["node_modules/", "dist/", ".cache/", "artifacts/", ".multienv/", "**/node_modules/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    languageOptions: { globals: { ...globals.node } },
    plugins: { "@stylistic": stylistic },
    rules: {
      // `_`-prefixed names are deliberately unused (a callback's position, a destructured rest).
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none", ignoreRestSiblings: true },
      ],
      // The CLI and the program load @pulumi/pulumi, playwright and each command's module lazily with require(),
      // so `multienv check` or `--help` starts without them (seconds saved on every call).
      "@typescript-eslint/no-require-imports": "off",
      // Messages and test names are strings users read whole; a string is not broken to fit.
      "@stylistic/max-len": [
        "error",
        { code: 120, ignoreStrings: true, ignoreTemplateLiterals: true, ignoreRegExpLiterals: true, ignoreUrls: true },
      ],
    },
  },
  ...layerRules(),
  {
    // Pulumi's dynamic-provider interface and untyped resource inputs are `any` at these seams; tests read
    // rendered resource inputs of every shape.
    files: ["src/providers/**", "src/runner/check/check.ts", "src/runner/check/graph.ts", "test/**", "bench/**"],
    rules: { "@typescript-eslint/no-explicit-any": "off" },
  },
);
