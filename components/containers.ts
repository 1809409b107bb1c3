// Shared by the components that run containers: turns wiring answers (src/plan/wiring.ts) into container
// inputs. No decisions here: networks, mounts and capabilities come from the plan, images from the engine.
import * as pulumi from "@pulumi/pulumi";
import type { NetworkAttachment, VolumeMount } from "../src/plan/wiring";
import type { DockerContainerArgs } from "../src/providers/resources";
import type { DockerEngine } from "./dockerEngine";

/** Container `networksAdvanced` for the attachments, naming each network through its resource (a dependency). */
export function networksAdvanced(
  engine: DockerEngine,
  attachments: NetworkAttachment[],
): NonNullable<DockerContainerArgs["networksAdvanced"]> {
  return attachments.map((a) => ({ name: engine.network(a.network).name, aliases: a.aliases }));
}

/** Container `mounts` for volume mounts, naming each volume through its resource (a dependency). */
export function volumeMounts(engine: DockerEngine, mounts: VolumeMount[]): NonNullable<DockerContainerArgs["mounts"]> {
  return mounts.map((m) => ({
    type: "volume",
    source: engine.volume(m.volume).name,
    target: m.target,
    readOnly: m.readOnly,
  }));
}

/** `KEY=value` entries; a secret value keeps the whole entry secret. */
export function envEntry(name: string, value: pulumi.Input<string>): pulumi.Output<string> {
  return pulumi.interpolate`${name}=${value}`;
}

/** A container's labels: the engine's (the stack's) and the container's own marks for the policy pack. */
export function containerLabels(engine: DockerEngine, own: Record<string, string>): { label: string; value: string }[] {
  return Object.entries({ ...engine.labels, ...own }).map(([label, value]) => ({ label, value }));
}

/** Restart policy of every long-running container: a crashed service comes back; `docker stop` is respected. */
export const RESTART = "unless-stopped";
