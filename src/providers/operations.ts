// Every resource kind of the project's dynamic providers, by name. resources.ts declares the resources; the
// dynamic-provider host that Pulumi starts loads this module (through tsx) to run their operations.
import { command, secret } from "./command";
import type { Operations } from "./operation";
import { selfTest } from "./self-test";
import { sshHostKey } from "./ssh-host-key";
import { gatewayTunnel } from "./tunnel";
import type { DYNAMIC_KINDS } from "./types";

export const OPERATIONS = {
  command,
  secret,
  selfTest,
  sshHostKey,
  gatewayTunnel,
} satisfies Record<(typeof DYNAMIC_KINDS)[number], Operations>;

export type Kind = keyof typeof OPERATIONS;
