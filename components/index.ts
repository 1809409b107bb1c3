// The components of a multi env, one per file.
export { MultiEnv } from "./multiEnv";
export type { MultiEnvArgs, MultiEnvOutputs } from "./multiEnv";
export type { WebsiteOutput, ComputerOutput } from "../src/protocol/outputs";
export { Website } from "./website";
export { Gateway } from "./gateway";
export { CaptureSidecar } from "./captureSidecar";
export { Computer } from "./computer";
export { DockerEngine } from "./dockerEngine";
export { Ec2Host } from "./ec2Host";
export { DockerTarget } from "./dockerTarget";
export { HostsTarget } from "./hostsTarget";
export { RemoteEngines } from "./remoteEngines";
export type { EnvTarget, EnvTargetArgs } from "./envTarget";
export { Ec2Firewall } from "./ec2Firewall";
export { ControlToken } from "./controlToken";
