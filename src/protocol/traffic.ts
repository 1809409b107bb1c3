// traffic/v1: the gateway serves the rotating pcap files its capture sidecars write.
// The names on the wire are defined here once; the gateway serves them and its client
// (gateway-client.ts) reads them.
import { z } from "zod";
import { findExtension, type AgentEnvCard } from "./card";

export const TRAFFIC_V1_URN = "urn:agentenv:traffic/v1";
/** GET: the listing (control token required). */
export const TRAFFIC_CAPTURES_PATH = "/traffic/v1/captures";
/** The media type of one capture file: classic pcap. */
export const PCAP_MEDIA_TYPE = "application/vnd.tcpdump.pcap";

/**
 * A capture file's name: `<site>-<role>.pcap<N>`, as tcpdump `-w <site>-<role>.pcap -C -W` names its rotating
 * files; `<site>-<role>.run<K>.pcap<N>` for the files of an earlier run, kept when the capture started again after
 * its website container restarted. Nothing else in the captures folder is served.
 */
export const CAPTURE_FILE_PATTERN =
  /^(?<site>[a-z0-9][a-z0-9-]*)-(?<role>server|frontend)(?:\.run(?<run>[1-9]\d*))?\.pcap(?<index>\d+)$/;

export type CaptureRole = "server" | "frontend";

/** A website container as the captures name it: `<site>-<role>` (the role is the suffix; a site name may hold `-`). */
export const CAPTURE_CONTAINER_PATTERN = /^(?<site>[a-z0-9][a-z0-9-]*)-(?<role>server|frontend)$/;

/** Site and role of a `<site>-<role>` container name, or undefined when it is not one. */
export function parseCaptureContainer(container: string): { site: string; role: CaptureRole } | undefined {
  const match = CAPTURE_CONTAINER_PATTERN.exec(container);
  return match?.groups ? { site: match.groups.site, role: match.groups.role as CaptureRole } : undefined;
}

/** One entry of the listing. */
export interface TrafficCapture {
  /** The file name, e.g. `shop-server.pcap0`. */
  name: string;
  site: string;
  role: CaptureRole;
  /** The website container the packets were seen in, as named on the env network: `<site>-<role>`. */
  container: string;
  /**
   * Which run of the container's capture wrote it, from 1: a capture starts a new run when its website container
   * restarted, and nothing was recorded between the end of one run (its newest file's `modified`) and the next.
   */
  run: number;
  bytes: number;
  /** Last modification, ISO 8601. */
  modified: string;
}

/** GET TRAFFIC_CAPTURES_PATH answers this; `captures` is oldest first. */
export interface TrafficCaptureListing {
  captures: TrafficCapture[];
}

/** What a listing is checked against where it is read from another service (the gateway reading capture servers). */
export const trafficCaptureListingSchema = z.object({
  captures: z.array(
    z.object({
      name: z.string().regex(CAPTURE_FILE_PATTERN),
      site: z.string(),
      role: z.enum(["server", "frontend"]),
      container: z.string(),
      run: z.number().int().positive(),
      bytes: z.number().int().nonnegative(),
      modified: z.iso.datetime(),
    }),
  ),
});

// A website container's capture server (kubernetes: beside the container's tcpdump, in its pod, serving that pod's
// captures folder to the gateway alone; `Authorization: Bearer <captureServerToken(control token, container)>` on
// every request). The gateway's traffic/v1 answers are made of these.
/** The port a capture server listens on. */
export const CAPTURE_SERVER_PORT = 8090;
/** GET/HEAD: the listing of the container's own captures (TrafficCaptureListing). */
export const CAPTURE_SERVER_LIST_PATH = "/captures";
/** GET/HEAD: 200 while the container's capture is writing, else 503 (CaptureServerHealth either way). */
export const CAPTURE_SERVER_HEALTH_PATH = "/healthz";

/** A capture server's /healthz answer. */
export interface CaptureServerHealth {
  ok: boolean;
  container: string;
  /** Why the capture is not writing (one line), when it is not. */
  problem?: string;
}

/** A capture server's path of one capture. */
export function captureServerFilePath(name: string): string {
  return `${CAPTURE_SERVER_LIST_PATH}/${encodeURIComponent(name)}`;
}

/** The path of one capture. */
export function capturePath(name: string): string {
  return `${TRAFFIC_CAPTURES_PATH}/${encodeURIComponent(name)}`;
}

/** The tcpdump `-w` prefix of a website container's capture: `<site>-<role>.pcap`. */
export function captureFilePrefix(site: string, role: CaptureRole): string {
  return `${site}-${role}.pcap`;
}

/**
 * Site, role, rotation index and the earlier run (undefined: the current one) of a capture file name, or undefined
 * when it is not one.
 */
export function parseCaptureName(
  name: string,
): { site: string; role: CaptureRole; index: number; earlierRun?: number } | undefined {
  const match = CAPTURE_FILE_PATTERN.exec(name);
  if (!match?.groups) return undefined;
  return {
    site: match.groups.site,
    role: match.groups.role as CaptureRole,
    index: Number(match.groups.index),
    ...(match.groups.run ? { earlierRun: Number(match.groups.run) } : {}),
  };
}

/** Where the capture of one container stopped and started again (its website container restarted). */
export interface CaptureGap {
  container: string;
  /** The run that ended. */
  run: number;
  /** The last write of that run (its newest file's modification): nothing was recorded from then. */
  endedAt: string;
  /** The first write of the next run that is still listed (its oldest file's modification). */
  resumedBy: string;
}

/** The gaps a listing shows: between consecutive runs of each container's capture. */
export function captureGaps(captures: TrafficCapture[]): CaptureGap[] {
  const gaps: CaptureGap[] = [];
  const byContainer = new Map<string, TrafficCapture[]>();
  for (const c of captures) byContainer.set(c.container, [...(byContainer.get(c.container) ?? []), c]);
  for (const [container, files] of byContainer) {
    const runs = [...new Set(files.map((f) => f.run))].sort((a, b) => a - b);
    for (const [i, run] of runs.slice(0, -1).entries()) {
      const modified = (r: number) =>
        files
          .filter((f) => f.run === r)
          .map((f) => f.modified)
          .sort();
      gaps.push({ container, run, endedAt: modified(run).at(-1)!, resumedBy: modified(runs[i + 1])[0] });
    }
  }
  return gaps;
}

/** The traffic/v1 extension as the gateway declares it in its card. */
export function trafficExtension() {
  return {
    uri: TRAFFIC_V1_URN,
    description: "Rotating pcap captures of the websites' containers; control token required.",
    params: { mediaType: PCAP_MEDIA_TYPE, order: "oldest-first" },
    paths: { list: TRAFFIC_CAPTURES_PATH, get: `${TRAFFIC_CAPTURES_PATH}/{name}` },
  };
}

/** True when a card (the gateway's) declares traffic/v1. */
export function servesTraffic(card: Pick<AgentEnvCard, "extensions"> | undefined): boolean {
  return findExtension(card, TRAFFIC_V1_URN) !== undefined;
}
