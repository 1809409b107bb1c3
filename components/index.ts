// The components of a multi env, one per file, in folders by family (docs/layout.md).
export { MultiEnv } from "./multiEnv";
export type { MultiEnvArgs, MultiEnvOutputs } from "./multiEnv";
export type { WebsiteOutput, ComputerOutput } from "../src/plan/stack-outputs";
export { Website } from "./engine/website";
export { Gateway } from "./engine/gateway";
export { CaptureSidecar } from "./engine/captureSidecar";
export { Computer } from "./engine/computer";
export { DockerEngine } from "./engine/engine";
export { Ec2Host } from "./ec2/host";
export { DockerTarget } from "./docker/target";
export { HostsTarget } from "./hosts/target";
export { RemoteEngines } from "./hosts/remoteEngines";
export type { EnvTarget, EnvTargetArgs } from "./engine/envTarget";
export { Ec2Firewall } from "./ec2/firewall";
export { ControlToken } from "./controlToken";
