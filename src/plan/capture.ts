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

/** One sidecar per website container (server, and frontend for synthetic sites), sorted by container name. */
export function captureSidecars(stack: string, websites: readonly PlannedWebsite[]): PlannedCapture[] {
  const sidecars: PlannedCapture[] = [];
  for (const website of websites) {
    const containers = [
      ["server", website.server] as const,
      ...(website.frontend ? [["frontend", website.frontend] as const] : []),
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
