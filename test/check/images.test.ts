// `multienv check` (and so `multienv up`, which runs it first) on the project images a deploy runs: a deploy builds
// none, so an image the engine lacks, or one built FROM another base than MULTIENV_BASE_IMAGE asks for, is a problem
// line naming the image and the command that builds it.
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import {
  projectImageProblems,
  referencedProjectImages,
  type FoundImage,
  type ProjectImageRole,
} from "../../src/plan/images";
import { formatProblem } from "../../src/plan/problems";
import { checkStack } from "../../src/runner/check/check";

const ROOT = resolve(__dirname, "..", "..");

/** An engine holding the images of `held`, each built FROM `base`. */
function engineWith(held: ProjectImageRole[], base = "multienv/node-base") {
  return async (roles: readonly ProjectImageRole[]): Promise<Partial<Record<ProjectImageRole, FoundImage>>> =>
    Object.fromEntries(roles.filter((r) => held.includes(r)).map((r) => [r, { id: `sha256:${r}`, baseImage: base }]));
}

describe("multienv check on the project's images", () => {
  it("names each image the engine lacks and the command that builds it, one line each", async () => {
    const result = await checkStack("demo", { projectDir: ROOT, imagesOn: engineWith(["gateway"]), env: {} });
    expect(result.ok).toBe(false);
    expect(result.problems).toEqual([
      "multienv: image multienv/site-proxy:latest is not on the Docker engine; build it: npm run images -- site-proxy",
      "multienv: image multienv/browser:latest is not on the Docker engine; build it: npm run images -- browser",
    ]);
  });

  it("passes when the engine has every image, built FROM any base unless MULTIENV_BASE_IMAGE asks for one", async () => {
    const all: ProjectImageRole[] = ["gateway", "site-proxy", "browser"];
    const registryBase = engineWith(all, "node:20-bookworm-slim");
    expect(await checkStack("demo", { projectDir: ROOT, imagesOn: registryBase, env: {} })).toMatchObject({
      ok: true,
      problems: [],
    });
    const asked = await checkStack("demo", {
      projectDir: ROOT,
      imagesOn: engineWith(all),
      env: { MULTIENV_BASE_IMAGE: "node:20-bookworm-slim" },
    });
    expect(asked.ok).toBe(false);
    expect(asked.problems).toContain(
      "multienv: image multienv/gateway:latest was built FROM multienv/node-base, not MULTIENV_BASE_IMAGE=node:20-bookworm-slim; build it again: MULTIENV_BASE_IMAGE=node:20-bookworm-slim npm run images -- gateway",
    );
    expect(asked.problems).toHaveLength(3);
  });

  it("warns, without failing, when the engine does not answer", async () => {
    const result = await checkStack("demo", {
      projectDir: ROOT,
      imagesOn: () => Promise.reject(new Error("connect ENOENT /var/run/docker.sock")),
      env: {},
    });
    expect(result.ok).toBe(true);
    expect(result.warnings).toContain(
      "the Docker engine did not answer (connect ENOENT /var/run/docker.sock), so whether it has the project's images is not checked",
    );
  });
});

describe("the project images a deploy runs", () => {
  // What the rule reads of a plan: the target, the computers' own images and the replayed sites.
  const planned = (target: "docker" | "ec2" | "kubernetes") =>
    ({ target, computers: [{ image: undefined }], websites: [{ replay: undefined }] }) as unknown as Parameters<
      typeof referencedProjectImages
    >[0];

  it("are read from the runner's engine on every Docker target, and none on the kubernetes one (its nodes pull)", () => {
    expect(referencedProjectImages(planned("docker"))).toEqual(["gateway", "site-proxy", "browser"]);
    expect(referencedProjectImages(planned("ec2"))).toEqual(["gateway", "site-proxy", "browser"]);
    expect(referencedProjectImages(planned("kubernetes"))).toEqual([]);
  });

  it("say nothing of an image built without the base label unless a base is asked for", () => {
    const found = { gateway: { id: "sha256:g" } };
    expect(projectImageProblems(["gateway"], found, undefined)).toEqual([]);
    expect(projectImageProblems(["gateway"], found, "multienv/node-base").map(formatProblem)).toEqual([
      "multienv: image multienv/gateway:latest was built FROM an unknown base (it has no multienv.base-image label), not MULTIENV_BASE_IMAGE=multienv/node-base; build it again: MULTIENV_BASE_IMAGE=multienv/node-base npm run images -- gateway",
    ]);
  });
});
