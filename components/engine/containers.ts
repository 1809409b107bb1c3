// Shared by the components that run containers: turns wiring answers (src/plan/wiring.ts) into container
// inputs. No decisions here: networks, mounts and capabilities come from the plan, images from the engine.
import type * as docker from "@pulumi/docker";
import * as pulumi from "@pulumi/pulumi";
import type { NetworkAttachment, VolumeMount } from "../../src/plan/wiring";
import type { DockerEngine } from "./engine";

/** Container `networksAdvanced` for the attachments, naming each network through its resource (a dependency). */
export function networksAdvanced(
  engine: DockerEngine,
  attachments: NetworkAttachment[],
): docker.types.input.ContainerNetworksAdvanced[] {
  return attachments.map((a) => ({ name: engine.network(a.network).name, aliases: a.aliases }));
}

/** Container `mounts` for volume mounts, naming each volume through its resource (a dependency). */
export function volumeMounts(engine: DockerEngine, mounts: VolumeMount[]): docker.types.input.ContainerMount[] {
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

/**
 * Options of every container on `engine`: its provider (and `deletedWith`); replacement on a change the docker
 * provider would report as an update yet never apply to a running container (its health check, mounts, init and
 * tmpfs), so what runs is always what the program says; and the old container deleted before its replacement is
 * created, since its Docker name is fixed: the plan names every container, the sites and the gateway reach each
 * other by those names, and the runner finds them by name (a suffixed name would break all three). An update
 * that replaces a container therefore stops it for a few seconds first.
 */
export function containerOptions(engine: DockerEngine): pulumi.CustomResourceOptions {
  return {
    ...engine.onEngine,
    replaceOnChanges: ["healthcheck", "mounts", "init", "tmpfs"],
    deleteBeforeReplace: true,
  };
}
