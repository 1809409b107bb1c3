// A replayed site's exchanges this episode (served exact, fuzzy, or missed), read through the gateway's
// `/replay/v1/<site>/counters`, and the episode ended there (`/replay/v1/<site>/reset`: its repeats start from the
// first recorded answer again). run.json holds the counters per replayed site; a miss is also a `replay-miss` line
// in the computer's proxy log.
import { GatewayClient, GatewayRequestError } from "../../protocol/gateway-client";
import type { ReplayCounters } from "../../protocol/replay-server-config";
import { errorMessage, RunnerError } from "../errors";

/** A replayed site's counters in run.json, or why they could not be read. */
export type ReplayEvidence = ReplayCounters | { error: string };

/** Each replayed site's counters of the episode under way; a site whose counters cannot be read says why. */
export async function readReplayCounters(
  gatewayUrl: string,
  controlToken: string,
  sites: readonly string[],
): Promise<Record<string, ReplayEvidence>> {
  const gateway = new GatewayClient(gatewayUrl, controlToken);
  const entries = await Promise.all(
    sites.map(async (site): Promise<[string, ReplayEvidence]> => {
      try {
        return [site, await gateway.replayCounters(site)];
      } catch (error) {
        const status = error instanceof GatewayRequestError ? error.status : undefined;
        return [
          site,
          {
            error: status === undefined ? errorMessage(error) : `the gateway answered HTTP ${status} for its counters`,
          },
        ];
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
  const gateway = new GatewayClient(gatewayUrl, controlToken);
  const entries = await Promise.all(
    sites.map(async (site): Promise<[string, ReplayCounters]> => {
      try {
        return [site, await gateway.resetReplay(site)];
      } catch (error) {
        const status = error instanceof GatewayRequestError ? error.status : undefined;
        throw new RunnerError(
          status === undefined
            ? errorMessage(error)
            : `replayed site ${site}: its replay server's reset answered HTTP ${status}`,
        );
      }
    }),
  );
  return Object.fromEntries(entries);
}
