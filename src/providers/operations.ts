// Every resource kind of the project's dynamic providers, by name. resources.ts declares the resources; the
// dynamic-provider host that Pulumi starts loads this module (through tsx) to run their operations.
import { command, secret } from "./command";
import { container } from "./docker-container";
import { image, imageRef } from "./docker-image";
import { network, volume } from "./docker-network";
import type { Operations } from "./operation";
import { selfTest } from "./self-test";
import { sshHostKey } from "./ssh-host-key";
import { gatewayTunnel } from "./tunnel";

export const OPERATIONS = {
  container,
  network,
  volume,
  image,
  imageRef,
  command,
  secret,
  selfTest,
  sshHostKey,
  gatewayTunnel,
} satisfies Record<string, Operations>;

export type Kind = keyof typeof OPERATIONS;
