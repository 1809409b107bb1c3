// Every resource kind of the project's dynamic providers, by name. resources.ts declares the resources; the
// dynamic-provider host that Pulumi starts loads this module (through tsx) to run their operations.
import { accountLease } from "./account-lease";
import { command, secret } from "./command";
import type { Operations } from "./operation";
import { selfTest } from "./self-test";
import { siteCleanup } from "./site-cleanup";
import { sshHostKey } from "./ssh-host-key";
import { gatewayTunnel } from "./tunnel";
import type { DYNAMIC_KINDS } from "../protocol/resource-types";

export const OPERATIONS = {
  command,
  secret,
  selfTest,
  sshHostKey,
  gatewayTunnel,
  accountLease,
  siteCleanup,
} satisfies Record<(typeof DYNAMIC_KINDS)[number], Operations>;

export type Kind = keyof typeof OPERATIONS;
