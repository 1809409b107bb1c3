// `selfTest`: the deploy's check, once the env is up, that each computer's network holds as planned
// (src/plan/self-test.ts decides the checks). Every check is a page load in the computer's own browser, in a
// browser context of its own (so the agent's profile keeps nothing of it), through the computer's own proxy:
// what the agent's browser would see. The proxy's log marks the self-test's start and end, so no episode's
// evidence counts its connections. A failed check fails the deploy, one line per failure naming the computer and the
// check (the engine shows every line of the error, and the runner reads them back).
// Start tabs are checked too, against the names the sites' own cards declare: a tab at a name no site claims
// would open an error page in front of the agent.
// A dynamic resource because it is the project's own check, run where Pulumi runs: no provider has it.
import { randomBytes } from "node:crypto";
import type { Browser, Response } from "playwright-core";
import { covers } from "../protocol/host-names";
import type { SelfTestCheck } from "../plan/types";
import { startTabHost } from "../plan/start-tabs";
import { findExtension, parseCard, WEBSITE_V1_URN, type GatewayCard } from "../protocol/card";
import { parseLiveSiteProxyLog, SITE_PROXY_HEADER, SiteProxyVerdict, type LogMark } from "../protocol/site-proxy";
import { gatewayClient, type GatewayClient } from "../protocol/gateway-client";
import { proxyLogPath } from "../protocol/gateway-paths";
import type { SelfTestCheckResult, SelfTestResults } from "../plan/stack-outputs";
import type { GatewayPortForward } from "../protocol/port-forward";
import { formatSelfTestFailure } from "../protocol/self-test-failure";
import { openGatewayReach } from "../engines/gateway-reach";
import { diffInputs, pick, type Operations } from "./operation";

const INPUT_KEYS = ["gatewayUrl", "controlToken", "checks", "startTabs", "deployed", "gatewayPortForward"] as const;
const NAVIGATION_TIMEOUT_MS = 20_000;

/** How long a computer's browser may take to answer on DevTools once its containers are up. */
const DEVTOOLS_READY_MS = 60_000;

/** Ends the computer's connections and marks its proxy's log; an older proxy that cannot is left unmarked. */
async function markLog(gateway: GatewayClient, computer: string, mark: LogMark): Promise<void> {
  await gateway.endConnections(computer, mark);
}

async function refusedInLog(gateway: GatewayClient, computer: string, host: string, since: string): Promise<boolean> {
  const answer = await gateway.send(`computer ${computer}'s site-proxy log`, proxyLogPath(computer));
  if (!answer.ok) return false;
  return parseLiveSiteProxyLog(await answer.text()).some(
    (r) => r.event === "refused" && r.host === host && r.time >= since,
  );
}

/** Who answered a navigation: the proxy itself (its marker), or the host. */
function answeredBy(response: Response): string {
  const verdict = response.headers()[SITE_PROXY_HEADER.toLowerCase()];
  return verdict === undefined
    ? `the host answered ${response.status()}`
    : `the proxy answered ${response.status()} (${verdict})`;
}

async function runCheck(
  gateway: GatewayClient,
  browser: Browser,
  computer: string,
  check: SelfTestCheck,
): Promise<SelfTestCheckResult> {
  const context = await browser.newContext();
  const started = new Date(Date.now() - 1000).toISOString();
  const result = (ok: boolean, detail: string): SelfTestCheckResult => ({
    check: check.name,
    url: check.url,
    ok,
    detail,
  });
  try {
    const page = await context.newPage();
    let response: Response | null = null;
    let error: string | undefined;
    try {
      response = await page.goto(check.url, { timeout: NAVIGATION_TIMEOUT_MS, waitUntil: "commit" });
    } catch (e) {
      error = (e as Error).message.split("\n")[0];
    }
    const fromProxy = response?.headers()[SITE_PROXY_HEADER.toLowerCase()];
    switch (check.expect) {
      case "synthetic-loads":
        if (!response) return result(false, `did not load: ${error}`);
        if (fromProxy !== undefined || response.status() >= 500) return result(false, answeredBy(response));
        return result(true, `${answeredBy(response)} over HTTPS, its certificate trusted`);
      case "live-connects":
      case "public-reached":
        if (!response) return result(false, `no answer: ${error}`);
        return result(fromProxy === undefined, answeredBy(response));
      case "refused": {
        if (response && fromProxy === SiteProxyVerdict.refused) return result(true, answeredBy(response));
        if (response) return result(false, `not refused: ${answeredBy(response)}`);
        // A refused CONNECT is only an error page (a browser that upgraded to HTTPS): the proxy's log says why.
        const host = new URL(check.url).hostname.replace(/^\[|\]$/g, "");
        if (await refusedInLog(gateway, computer, host, started))
          return result(true, `refused (the proxy's log has it; the browser saw ${error})`);
        return result(false, `no refusal from the proxy: ${error}`);
      }
    }
  } finally {
    await context.close().catch(() => undefined);
  }
}

async function testComputer(
  gateway: GatewayClient,
  computer: string,
  checks: SelfTestCheck[],
): Promise<SelfTestCheckResult[]> {
  // Loaded here: every other resource kind's operations run in the same host, and need no browser client.
  const { chromium } = require("playwright-core") as typeof import("playwright-core");
  let browser: Browser | undefined;
  // The containers are up, but a browser under a loaded engine may still be starting: the gateway answers 502
  // until its DevTools relay listens, so that is retried until the deadline.
  const until = Date.now() + DEVTOOLS_READY_MS;
  for (;;) {
    try {
      browser = await chromium.connectOverCDP(gateway.cdpUrl(computer), {
        headers: { Authorization: gateway.authorization() },
        timeout: 30_000,
      });
      break;
    } catch (error) {
      const detail = (error as Error).message.split("\n")[0];
      if (Date.now() < until && /Unexpected status 50[234]/.test(detail)) {
        await new Promise((resolve) => setTimeout(resolve, 500));
        continue;
      }
      return [{ check: "its browser answers on DevTools through the gateway", url: "", ok: false, detail }];
    }
  }
  await markLog(gateway, computer, { selfTest: "start" }).catch(() => undefined);
  try {
    const results: SelfTestCheckResult[] = [];
    for (const check of checks) results.push(await runCheck(gateway, browser, computer, check));
    return results;
  } finally {
    await browser.close().catch(() => undefined);
    await markLog(gateway, computer, { selfTest: "end" }).catch(() => undefined);
  }
}

/**
 * Each start tab's host against the names the sites' cards declare (website/v1 `domains`), as served by the gateway.
 */
export async function checkStartTabs(
  gateway: GatewayClient,
  startTabs: Record<string, string[]>,
  retryMs = CARD_RETRY_MS,
): Promise<Record<string, SelfTestCheckResult[]>> {
  if (Object.keys(startTabs).length === 0) return {};
  const hosts = Object.values(startTabs)
    .flat()
    .map(startTabHost)
    .flatMap((parsed) => ("host" in parsed ? [parsed.host] : []));
  // A site server still starting (or a busy machine) can miss the gateway's 3 s wait for its card, and the gateway
  // then leaves that site out: ask again for a while before calling a start tab's name unclaimed.
  const deadline = Date.now() + retryMs;
  let read = await readDeclaredNames(gateway);
  while (
    Date.now() < deadline &&
    (read.card === undefined || hosts.some((host) => !read.declared.some((d) => covers(d.name, host))))
  ) {
    await new Promise((resolve) => setTimeout(resolve, Math.min(1_000, retryMs / 4)));
    read = await readDeclaredNames(gateway);
  }
  const { card, declared, problem } = read;
  const listed = Object.keys(card?.sites ?? {}).sort();
  return Object.fromEntries(
    Object.entries(startTabs).map(([computer, tabs]) => [
      computer,
      tabs.map((tab): SelfTestCheckResult => {
        const parsed = startTabHost(tab);
        const check = `start tab ${tab} is at a name a site's card declares`;
        if (!("host" in parsed)) return { check, url: tab, ok: true, detail: "not a web page" };
        if (card === undefined) return { check, url: tab, ok: false, detail: problem };
        const claim = declared.find((d) => covers(d.name, parsed.host));
        return claim
          ? { check, url: tab, ok: true, detail: `site ${claim.site} declares ${claim.name}` }
          : {
              check,
              url: tab,
              ok: false,
              detail: `no site's card declares ${parsed.host} (the gateway's card has ${listed.length === 0 ? "no site" : `the sites ${listed.join(", ")}`}; a site whose card did not answer is left out)`,
            };
      }),
    ]),
  );
}

/** How long the start-tab check asks the gateway's card again before it calls a name unclaimed. */
const CARD_RETRY_MS = 20_000;

/** The gateway's card and the names its sites' cards declare (website/v1 `domains` and `allowHosts`). */
async function readDeclaredNames(
  gateway: GatewayClient,
): Promise<{ card?: GatewayCard; declared: { site: string; name: string }[]; problem: string }> {
  let card: GatewayCard | undefined;
  let problem = "";
  try {
    card = await gateway.card("the gateway's card");
  } catch (error) {
    problem = (error as Error).message;
  }
  const declared = Object.entries(card?.sites ?? {}).flatMap(([site, raw]) => {
    const params = findExtension(parseCard(raw), WEBSITE_V1_URN)?.params ?? {};
    const names = [
      ...(Array.isArray(params.domains) ? params.domains : []),
      ...(Array.isArray(params.allowHosts) ? params.allowHosts : []),
    ];
    return names.filter((n): n is string => typeof n === "string").map((name) => ({ site, name }));
  });
  return { card, declared, problem };
}

/** Runs every check; the results, whatever they are. */
export async function runSelfTest(inputs: {
  gatewayUrl: string;
  controlToken: string;
  checks: Record<string, SelfTestCheck[]>;
  startTabs: Record<string, string[]>;
  /** Kubernetes: the gateway's pod, which `gatewayUrl` names; reached through a port-forward for the run. */
  gatewayPortForward?: GatewayPortForward;
}): Promise<SelfTestResults> {
  // A gateway that cannot be reached fails the deploy with its own line (kubernetes: the pod and namespace, and what
  // to run).
  const reach = await openGatewayReach(inputs, { owner: "the self-test" });
  try {
    return await runChecks({ ...inputs, gatewayUrl: reach.url });
  } finally {
    await reach.close();
  }
}

async function runChecks(inputs: Parameters<typeof runSelfTest>[0]): Promise<SelfTestResults> {
  const started = Date.now();
  const gateway = gatewayClient(inputs);
  const [computers, startTabs] = await Promise.all([
    Promise.all(
      Object.entries(inputs.checks).map(
        async ([computer, checks]) => [computer, await testComputer(gateway, computer, checks)] as const,
      ),
    ).then(Object.fromEntries),
    checkStartTabs(gateway, inputs.startTabs),
  ]);
  const all = [...Object.values(computers), ...Object.values(startTabs)].flat() as SelfTestCheckResult[];
  return {
    passed: all.every((r) => r.ok),
    finishedAt: new Date().toISOString(),
    seconds: (Date.now() - started) / 1000,
    computers,
    startTabs,
  };
}

/**
 * The deploy's error for failed checks: a first line that stands alone, then one line per failure, naming the
 * computer and the check (src/protocol/self-test-failure.ts).
 */
export function selfTestFailure(results: SelfTestResults): string {
  return formatSelfTestFailure(results);
}

async function run(inputs: Record<string, any>): Promise<Record<string, any>> {
  const results = await runSelfTest(inputs as Parameters<typeof runSelfTest>[0]);
  if (!results.passed) throw new Error(selfTestFailure(results));
  return { ...pick(inputs, INPUT_KEYS), results };
}

export const selfTest: Operations = {
  async diff(_id, olds, news) {
    // Any change to what is tested, or to the containers it runs in, runs it again.
    return diffInputs(olds, news, INPUT_KEYS, { replaceOn: [] });
  },
  async create(inputs) {
    return { id: `self-test-${randomBytes(8).toString("hex")}`, outs: await run(inputs) };
  },
  async update(_id, _olds, news) {
    return { outs: await run(news) };
  },
};
