// The content digest of a project image's build context, read where the program runs. The docker provider
// builds an image again only when one of its inputs changes and does not hash the context itself, so the
// image's `triggers` carry this digest: a changed bundle or Dockerfile rebuilds it, an unchanged one is no change.
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { projectImageFiles, type ProjectImage } from "./plan/images";

/**
 * sha256 of the Dockerfile and every file the build copies (names and contents), with its build arguments. A
 * file not there yet (a graph rendered without bundling) counts as empty, so `multienv check` needs no build.
 */
export function imageContextDigest(context: string, image: ProjectImage, buildArgs: Record<string, string>): string {
  const hash = createHash("sha256");
  for (const file of [image.dockerfile, ...projectImageFiles(image)]) {
    const full = path.join(context, file);
    hash
      .update(`${file}\0`)
      .update(fs.existsSync(full) ? fs.readFileSync(full) : Buffer.alloc(0))
      .update("\0");
  }
  hash.update(JSON.stringify(Object.entries(buildArgs).sort()));
  return hash.digest("hex");
}
