// A replayed site's exchanges this episode (served exact, fuzzy, or missed), read through the gateway's
// `/replay/v1/<site>/counters`, and the episode ended there (`/replay/v1/<site>/reset`: its repeats start from the
// first recorded answer again). run.json holds the counters per replayed site; a miss is also a `replay-miss` line
// in the computer's proxy log.
import { bearer } from "../../protocol/auth";
import type { ReplayCounters } from "../../protocol/replay-server-config";
import { errorMessage, RunnerError } from "../errors";

/** A replayed site's counters in run.json, or why they could not be read. */
export type ReplayEvidence = ReplayCounters | { error: string };

function replayUrl(gatewayUrl: string, site: string, op: "counters" | "reset"): string {
  return `${gatewayUrl.replace(/\/+$/, "")}/replay/v1/${encodeURIComponent(site)}/${op}`;
}

function isCounters(value: unknown): value is ReplayCounters {
  const v = value as Partial<ReplayCounters> | null;
  return (
    typeof v === "object" &&
    v !== null &&
    typeof v.exact === "number" &&
    typeof v.fuzzy === "number" &&
    typeof v.missed === "number"
  );
}

/** Each replayed site's counters of the episode under way; a site whose counters cannot be read says why. */
export async function readReplayCounters(
  gatewayUrl: string,
  controlToken: string,
  sites: readonly string[],
): Promise<Record<string, ReplayEvidence>> {
  const entries = await Promise.all(
    sites.map(async (site): Promise<[string, ReplayEvidence]> => {
      try {
        const response = await fetch(replayUrl(gatewayUrl, site, "counters"), {
          headers: { authorization: bearer(controlToken) },
        });
        const body: unknown = await response.json().catch(() => undefined);
        if (!response.ok || !isCounters(body))
          return [site, { error: `the gateway answered HTTP ${response.status} for its counters` }];
        return [site, { exact: body.exact, fuzzy: body.fuzzy, missed: body.missed }];
      } catch (error) {
        return [site, { error: errorMessage(error) }];
      }
    }),
  );
  return Object.fromEntries(entries);
}

/** Ends the episode on each replayed site's replay server; answers the ended episode's counters by site. */
export async function resetReplays(
  gatewayUrl: string,
  controlToken: string,
  sites: readonly string[],
): Promise<Record<string, ReplayCounters>> {
  const entries = await Promise.all(
    sites.map(async (site): Promise<[string, ReplayCounters]> => {
      const response = await fetch(replayUrl(gatewayUrl, site, "reset"), {
        method: "POST",
        headers: { authorization: bearer(controlToken) },
      });
      const body = (await response.json().catch(() => undefined)) as { ended?: unknown } | undefined;
      if (!response.ok || !isCounters(body?.ended))
        throw new RunnerError(`replayed site ${site}: its replay server's reset answered HTTP ${response.status}`);
      return [site, body.ended];
    }),
  );
  return Object.fromEntries(entries);
}
