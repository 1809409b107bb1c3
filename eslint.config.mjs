// ESLint with typescript-eslint's recommended rules: the linter the TypeScript field uses (typescript-eslint is
// what the TypeScript team points to since TSLint), over every TypeScript and JavaScript file in the repository.
// Layout is Prettier's (.prettierrc.json), so no rule here is about formatting.
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import globals from "globals";

export default tseslint.config(
  { ignores: ["node_modules/", "dist/", ".cache/", "artifacts/", ".multienv/", "**/node_modules/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      // `_`-prefixed names are deliberately unused (a callback's position, a destructured rest).
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none", ignoreRestSiblings: true }],
      // The CLI and the program load @pulumi/pulumi, playwright and each command's module lazily with require(),
      // so `multienv check` or `--help` starts without them (seconds saved on every call).
      "@typescript-eslint/no-require-imports": "off",
    },
  },
  {
    // Pulumi's dynamic-provider interface and untyped resource inputs are `any` at these seams; tests read
    // rendered resource inputs of every shape.
    files: ["src/providers/**", "src/runner/check.ts", "src/runner/graph.ts", "test/**", "bench/**"],
    rules: { "@typescript-eslint/no-explicit-any": "off" },
  },
);
