// The image catalogue: the project's own images (gateway, site proxy, browser), what each build copies, the
// base they build on, and which of them an engine needs.
import type { Plan, PlannedComputer, PlannedWebsite } from "./types";

/** The project's own images, built from `src/<role>/Dockerfile` when a container gives no image of its own. */
export type ProjectImageRole = "gateway" | "site-proxy" | "browser" | "replay-server";

/** A project image: its tag, its Dockerfile, and the bundles (scripts/bundle.mjs names) it copies. */
export interface ProjectImage {
  imageName: string;
  dockerfile: string;
  /** The bundles the Dockerfile copies from `dist/bundle/<name>.js`: with the Dockerfile, the whole build context. */
  bundles: string[];
}

export const PROJECT_IMAGES: Record<ProjectImageRole, ProjectImage> = {
  gateway: {
    imageName: "multienv/gateway:latest",
    dockerfile: "src/gateway/Dockerfile",
    bundles: ["gateway", "capture-server"],
  },
  "site-proxy": {
    imageName: "multienv/site-proxy:latest",
    dockerfile: "src/site-proxy/Dockerfile",
    bundles: ["site-proxy", "site-proxy-supervisor"],
  },
  browser: {
    imageName: "multienv/browser:latest",
    dockerfile: "src/browser/Dockerfile",
    bundles: ["browser-launcher"],
  },
  // What each replayed site's recording image is built FROM (src/plan/replay.ts).
  "replay-server": {
    imageName: "multienv/replay-server:latest",
    dockerfile: "src/replay-server/Dockerfile",
    bundles: ["replay-server"],
  },
};

/** The files of a project image's build context besides its Dockerfile, relative to the repository root. */
export function projectImageFiles(image: ProjectImage): string[] {
  return image.bundles.map((b) => `dist/bundle/${b}.js`);
}

/**
 * The `BASE_IMAGE` build argument of the project's Dockerfiles: Debian with Node 20, which
 * `scripts/build-images.sh` builds offline (debootstrap). `MULTIENV_BASE_IMAGE` overrides it.
 */
export const DEFAULT_BASE_IMAGE = "multienv/node-base";

/**
 * Capture sidecars run tcpdump. They use the gateway image, which carries tcpdump, so a capture needs no
 * image from a registry and an env always captures with the tcpdump its gateway was built with.
 */
export const CAPTURE_IMAGE_ROLE: ProjectImageRole = "gateway";

/**
 * The project images an engine builds: the gateway's where the gateway runs (capture sidecars use it too), and
 * the site proxy's and browser's where computers run, unless every browser there has an image of its own.
 */
export function projectImagesNeeded(
  gatewayHere: boolean,
  computers: PlannedComputer[],
  websites: readonly Pick<PlannedWebsite, "replay">[] = [],
): ProjectImageRole[] {
  const roles = new Set<ProjectImageRole>();
  if (gatewayHere) roles.add("gateway").add(CAPTURE_IMAGE_ROLE);
  // Replay servers run where the gateway does, each from a recording image built FROM the replay server's.
  if (gatewayHere && websites.some((w) => w.replay !== undefined)) roles.add("replay-server");
  if (computers.length > 0) roles.add("site-proxy");
  if (computers.some((c) => c.image === undefined)) roles.add("browser");
  return [...roles];
}

/** The images a remote engine's containers run: the project's by role, the others by reference. */
export interface RemoteEngineImages {
  roles: ProjectImageRole[];
  refs: string[];
  /** The recording images of the replayed sites (by their SHA-256), built on the runner's engine. */
  recordings: string[];
}

/**
 * What a remote engine runs (ec2 and hosts): the env's host the gateway (its capture sidecars use it too) and
 * every site image; a computer's host its proxy and its browser, the project's or its own.
 */
export function remoteEngineImages(plan: Pick<Plan, "websites">, computer?: PlannedComputer): RemoteEngineImages {
  if (computer !== undefined) {
    return {
      roles: computer.image === undefined ? ["site-proxy", "browser"] : ["site-proxy"],
      refs: computer.image === undefined ? [] : [computer.image],
      recordings: [],
    };
  }
  const refs = plan.websites
    .flatMap((w) => [w.server.image, w.frontend?.image])
    .filter((i): i is string => i !== undefined);
  const recordings = plan.websites.flatMap((w) => (w.replay ? [w.replay.recording.sha256] : []));
  return { roles: ["gateway"], refs: [...new Set(refs)].sort(), recordings: [...new Set(recordings)].sort() };
}
