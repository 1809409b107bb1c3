// The image catalogue: the project's own images (gateway, site proxy, browser), what each build copies, the
// base they build on, and which of them an engine needs. A deploy builds none of them: `npm run images` does, and the
// deploy runs them by the id the engine has under their tag (`projectImageProblems` says what is missing).
import { problem } from "./problems";
import type { Plan, PlannedComputer, PlannedWebsite, Problem } from "./types";

/**
 * The project's own images, built from `src/<role>/Dockerfile` by `npm run images` (scripts/build-images.sh, which
 * names each image by its role), run when a container gives no image of its own.
 */
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

/** The base the images must have been built FROM: the one `MULTIENV_BASE_IMAGE` asks for, else any. */
export function requestedBaseImage(env: Record<string, string | undefined>): string | undefined {
  return env.MULTIENV_BASE_IMAGE || undefined;
}

/** The label `npm run images` puts on each image: the `BASE_IMAGE` it was built FROM. */
export const BASE_IMAGE_LABEL = "multienv.base-image";

/** The id (`sha256:...`) of each project image a deploy runs, by role, as the runner's engine has it under its tag. */
export type ProjectImageIds = Partial<Record<ProjectImageRole, string>>;

/** The ids of `roles` alone, of the project images a deploy runs: what one engine runs. */
export function projectImageIdsOf(ids: ProjectImageIds, roles: readonly ProjectImageRole[]): ProjectImageIds {
  return Object.fromEntries(roles.flatMap((role) => (ids[role] === undefined ? [] : [[role, ids[role]]])));
}

/** What the engine has under a project image's tag: its id (`sha256:...`) and the base it was built FROM. */
export interface FoundImage {
  id: string;
  /** The image's `multienv.base-image` label; undefined when it has none (not built by `npm run images`). */
  baseImage?: string;
}

/**
 * The project images a deploy of `plan` runs from the runner's engine: on the docker target there; on ec2 and hosts
 * shipped from there. The kubernetes target's nodes pull them from the cluster's registry (docs/kubernetes.md).
 */
export function referencedProjectImages(plan: Pick<Plan, "target" | "computers" | "websites">): ProjectImageRole[] {
  if (plan.target === "kubernetes") return [];
  return projectImagesNeeded(true, plan.computers, plan.websites);
}

/** The command that builds the project image of `role` (on `base` when one is asked for). */
export function imageBuildCommand(role: ProjectImageRole, base: string | undefined): string {
  return `${base === undefined ? "" : `MULTIENV_BASE_IMAGE=${base} `}npm run images -- ${role}`;
}

/**
 * One problem per project image the deploy cannot run as asked: not on the engine, or, when the deploy asks for a
 * base (`MULTIENV_BASE_IMAGE`), built FROM another one (or not by `npm run images` at all); each names the command
 * that builds it. Without a base asked for, an image built FROM any base runs: the images are built, not the deploy's.
 */
export function projectImageProblems(
  roles: readonly ProjectImageRole[],
  found: Partial<Record<ProjectImageRole, FoundImage>>,
  base: string | undefined,
): Problem[] {
  const problems: Problem[] = [];
  for (const role of roles) {
    const tag = PROJECT_IMAGES[role].imageName;
    const image = found[role];
    if (image === undefined)
      problems.push(
        problem("", `image ${tag} is not on the Docker engine; build it: ${imageBuildCommand(role, base)}`),
      );
    else if (base !== undefined && image.baseImage !== base)
      problems.push(
        problem(
          "",
          `image ${tag} was built FROM ${image.baseImage ?? "an unknown base (it has no multienv.base-image label)"}, not MULTIENV_BASE_IMAGE=${base}; build it again: ${imageBuildCommand(role, base)}`,
        ),
      );
  }
  return problems;
}

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
