// A capture sidecar: tcpdump in one website container's network namespace, writing rotating files to the
// captures volume. The only container that holds NET_RAW/NET_ADMIN and mounts the captures volume read-write.
import * as pulumi from "@pulumi/pulumi";
import {
  CAPTURE_CAPABILITIES,
  CAPTURE_RESTART,
  CAPTURE_STOP_SIGNAL,
  captureCommand,
  captureSidecarMounts,
  sharedNetworkMode,
} from "../../src/plan/wiring";
import { CAPTURE_IMAGE_ROLE } from "../../src/plan/images";
import type { Plan, PlannedCapture } from "../../src/plan";
import { LABELS, ROLES } from "../../src/protocol/labels";
import * as docker from "@pulumi/docker";
import { containerLabels, containerOptions, volumeMounts } from "./containers";
import type { DockerEngine } from "./engine";

export interface CaptureSidecarArgs {
  /** The plan: capture file size and count, the captures volume. */
  plan: Pick<Plan, "capture">;
  /** Which container this sidecar records, and its file prefix. */
  sidecar: PlannedCapture;
  /** The website container whose network namespace the sidecar joins; must be `sidecar.target`. */
  target: docker.Container;
  /** The engine holding the captures volume and the image tcpdump comes from. */
  engine: DockerEngine;
}

/** tcpdump in one website container's network namespace, writing the site's rotating capture files. */
export class CaptureSidecar extends pulumi.ComponentResource {
  readonly container: docker.Container;

  constructor(name: string, args: CaptureSidecarArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:capture:CaptureSidecar", name, {}, opts);
    if (!args.plan.capture.enabled) {
      throw new pulumi.ResourceError(
        `CaptureSidecar ${name}: capture is off in this plan; a sidecar would record traffic nobody asked for`,
        this,
      );
    }
    const [entrypoint, ...rest] = captureCommand(args.plan, args.sidecar);
    this.container = new docker.Container(
      name,
      {
        name: args.sidecar.containerName,
        image: args.engine.image(undefined, CAPTURE_IMAGE_ROLE),
        entrypoints: [entrypoint],
        command: rest,
        networkMode: args.target.id.apply(sharedNetworkMode),
        capabilities: { adds: CAPTURE_CAPABILITIES.adds, drops: CAPTURE_CAPABILITIES.drops },
        mounts: volumeMounts(args.engine, captureSidecarMounts(args.plan)),
        restart: CAPTURE_RESTART,
        stopSignal: CAPTURE_STOP_SIGNAL,
        labels: containerLabels(args.engine, {
          [LABELS.role]: ROLES.capture,
          [LABELS.captureSite]: args.sidecar.site,
          [LABELS.captureRole]: args.sidecar.role,
        }),
      },
      { parent: this, ...containerOptions(args.engine) },
    );
    this.registerOutputs({ containerName: this.container.name });
  }
}
