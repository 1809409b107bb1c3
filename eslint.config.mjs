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
  {
    // The runner is on top: the program, the services, the providers, the plan, the components and the policy pack
    // never import it (what they share with it lives below it, in src/protocol, src/engines and src/errors.ts).
    files: ["src/**", "components/**", "policies/**", "index.ts"],
    ignores: ["src/runner/**"],
    rules: {
      "no-restricted-imports": [
        "error",
        { patterns: [{ regex: "(^|/)runner(/|$)", message: "the runner is on top: nothing below it imports it" }] },
      ],
    },
  },
  {
    // Pulumi's dynamic-provider interface and untyped resource inputs are `any` at these seams; tests read
    // rendered resource inputs of every shape.
    files: ["src/providers/**", "src/runner/check/check.ts", "src/runner/check/graph.ts", "test/**", "bench/**"],
    rules: { "@typescript-eslint/no-explicit-any": "off" },
  },
);
