// The gateway's card: its own extensions plus each site's card re-rooted under /svc/<site>.
// A site whose card is missing, slow or broken is left out; the rest still answer.
import type http from "node:http";
import { CARD_PATH, parseCard, prefixCardPaths, type AgentEnvCard, type GatewayCard } from "../protocol/card";
import { sitePath } from "../protocol/gateway-paths";
import { requestsExtension } from "../protocol/request-log";
import { trafficExtension } from "../protocol/traffic";
import type { GatewayConfig } from "./config";
import { getSmall } from "./fetch";
import type { Logger } from "../service-kit/log";
import { RequestLogs } from "./requests";

const CARD_TIMEOUT_MS = 3_000;

async function siteCard(
  name: string,
  site: GatewayConfig["sites"][string],
  agent: http.Agent,
  log: Logger,
): Promise<AgentEnvCard | undefined> {
  const url = new URL(site.server.pathname.replace(/\/+$/, "") + CARD_PATH, site.server);
  try {
    const fetched = await getSmall(url, { timeoutMs: CARD_TIMEOUT_MS, agent, headers: { accept: "application/json" } });
    if (fetched.status !== 200) throw new Error(`HTTP ${fetched.status}`);
    const card = parseCard(JSON.parse(fetched.body.toString("utf8")));
    if (!card) throw new Error("not an agent-env card");
    const rooted = prefixCardPaths(card, sitePath(name, ""));
    return site.live || !site.frontend ? rooted : { ...rooted, browsePath: sitePath(name, "/", "website") };
  } catch (error) {
    log("site-card-missing", { site: name, error: (error as Error).message });
    return undefined;
  }
}

export async function gatewayCard(config: GatewayConfig, agent: http.Agent, log: Logger): Promise<GatewayCard> {
  const names = Object.keys(config.sites);
  const cards = await Promise.all(names.map((name) => siteCard(name, config.sites[name], agent, log)));
  const sites: Record<string, AgentEnvCard> = {};
  names.forEach((name, i) => {
    const card = cards[i];
    if (card) sites[name] = card;
  });
  return {
    name: "multienv-gateway",
    description:
      "The multi env's gateway: the websites' servers under /svc/<site>, synthetic sites' pages under /website/<site>/.",
    version: "1",
    extensions: [
      ...(config.capturesDir === undefined && config.captureSources === undefined ? [] : [trafficExtension()]),
      ...(RequestLogs.served(config.computers) ? [requestsExtension()] : []),
    ],
    sites,
  };
}
