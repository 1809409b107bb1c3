export { ConfigError } from "./errors";
export { loadStackConfig } from "./load";
export type { LoadedStackConfig } from "./load";
export { readStackFile, stackNameOfFile, SECRET_MARKER, StackFileError } from "./stack-file";
export type { StackFile } from "./stack-file";
export { stackConfigSchema, STACK_KEYS } from "./schema";
export { validateStackConfig, decodeConfigValue } from "./validate";
export { formatProblem } from "../plan/problems";
