// Traffic capture (docs/design.md "Rules": capture; "Topology": capture sidecars).
import { problem } from "./problems";
import { topologyNames } from "./topology";
import type { PlannedCapture, PlannedWebsite, Problem, StackConfig } from "./types";

/** captureTraffic with no website in the env is refused: there would be nothing to record. */
export function captureProblems(config: Pick<StackConfig, "captureTraffic" | "websites">): Problem[] {
  if (config.captureTraffic && Object.keys(config.websites).length === 0) {
    return [
      problem(
        ["captureTraffic"],
        "capture records websites' traffic and the env has no website; add a website or set captureTraffic: false",
      ),
    ];
  }
  return [];
}

/** Past this total of capture files (in MB, as fileSizeMb counts), the captures would fill any reasonable disk. */
export const CAPTURE_WARNING_TOTAL_MB = 100_000;

/**
 * A warning when the captures could grow past any reasonable disk: each website container (a server, and a synthetic
 * site's frontend) keeps up to fileCount files of fileSizeMb.
 */
export function captureWarnings(config: Pick<StackConfig, "captureTraffic" | "capture" | "websites">): Problem[] {
  if (!config.captureTraffic) return [];
  const containers = Object.values(config.websites).reduce((n, w) => n + (w.live ? 1 : 2), 0);
  const { fileSizeMb, fileCount } = config.capture;
  const totalMb = fileSizeMb * fileCount * containers;
  if (totalMb <= CAPTURE_WARNING_TOTAL_MB) return [];
  return [
    problem(
      ["capture"],
      `lets the captures grow to ${(totalMb / 1000).toLocaleString("en-US")} GB (${fileSizeMb} MB × ${fileCount} files × ${containers} website containers), past any reasonable disk; lower fileSizeMb or fileCount`,
    ),
  ];
}

/**
 * One sidecar per website container (server, and the frontend of a synthetic site or the replay server of a replayed
 * one), sorted by container name.
 */
export function captureSidecars(stack: string, websites: readonly PlannedWebsite[]): PlannedCapture[] {
  const sidecars: PlannedCapture[] = [];
  for (const website of websites) {
    const containers = [
      ["server", website.server] as const,
      // A replayed site's replay server is its frontend for the gateway, and captured as such.
      ...(website.frontend || website.replay ? [["frontend", (website.frontend ?? website.replay)!] as const] : []),
    ];
    for (const [role, container] of containers) {
      sidecars.push({
        target: container.containerName,
        site: website.name,
        role,
        containerName: topologyNames.capture(stack, website.name, role),
        filePrefix: topologyNames.captureFilePrefix(website.name, role),
      });
    }
  }
  return sidecars.sort((a, b) => (a.containerName < b.containerName ? -1 : 1));
}
