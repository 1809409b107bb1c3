export { ConfigError } from "./errors";
export { loadStackConfig, readStackFile, stackNameOfFile, SECRET_MARKER } from "./load";
export type { LoadedStackConfig, StackFile } from "./load";
export { stackConfigSchema, STACK_KEYS } from "./schema";
export { validateStackConfig, decodeConfigValue } from "./validate";
export { formatProblem } from "../plan/problems";
