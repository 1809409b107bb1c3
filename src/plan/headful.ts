// A headful computer: Chromium on a display of Xvfb, which the project's browser image carries and its launcher
// starts. The rule of where it can run.
import { problem } from "./problems";
import type { ComputerConfig, Problem } from "./types";

/**
 * A headful computer's problems: one whose browser runs an image of its own is refused, since that image (not the
 * project's launcher) decides how its browser runs, and a browser left headless would still say HeadlessChrome while
 * the env claims a headful one.
 */
export function headfulProblems(
  computer: string,
  config: Partial<Pick<ComputerConfig, "headful" | "image">>,
): Problem[] {
  if (config.headful !== true || config.image === undefined) return [];
  return [
    problem(
      ["computers", computer, "headful"],
      `needs the project's browser image, which runs Chromium on a display of Xvfb, and computer ${computer} runs its own (image: ${JSON.stringify(config.image)}); remove image, or headful`,
    ),
  ];
}
