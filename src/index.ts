// multienv as a package: what a harness imports by name, `import { deployStack, checkStackFile } from "multienv"`.
// The runner's API (deploy, outputs, collect, reset, destroy, the operator's view), the stack file's offline check,
// and the types of the config, the plan and the stack's outputs. The components, for a program of one's own, are
// `multienv/components` (components/index.ts): they load Pulumi's SDK and providers, which the runner's API loads
// only once a command runs.
export * from "./runner/index";
export { checkStackFile, resolveStackFile, type StackFileCheck } from "./runner/check/stack-file";
export {
  ConfigError,
  loadStackConfig,
  readStackFile,
  stackConfigSchema,
  StackFileError,
  STACK_KEYS,
  validateStackConfig,
  type LoadedStackConfig,
  type StackFile,
} from "./config/index";
export { plan } from "./plan/index";
export type { Plan, Problem, StackConfig } from "./plan/types";
export type {
  ComputerOutput,
  SelfTestOutput,
  SelfTestResults,
  StackOutputValues,
  WebsiteOutput,
} from "./plan/stack-outputs";
