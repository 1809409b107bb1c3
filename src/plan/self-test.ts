// The self-test a deploy runs once the env is up: what each computer's browser must and must not reach, checked
// from inside it, through its own proxy. Pure: which checks a computer gets follows from its reaching and the
// sites; the checks themselves run in src/providers/self-test.ts.
import { startTabHost } from "./start-tabs";
import { covers, isWildcard } from "../protocol/host-names";
import { problem } from "./problems";
import { servedLive } from "./replay";
import type {
  PlannedComputer,
  PlannedWebsite,
  Problem,
  Reaching,
  SelfTestCheck,
  SelfTestPlan,
  StackConfig,
} from "./types";

/**
 * Set to `off` in the program's environment, it skips the self-test whatever the config says (`multienv up
 * --no-self-test`).
 */
export const SELF_TEST_ENV = "MULTIENV_SELF_TEST";

/** A name no computer's reaching can hold (`.invalid` is reserved and never resolves). */
export const OFF_REACH_HOST = "not-reached.multienv.invalid";
/** The cloud metadata address: an address every computer is refused, in every mode. */
export const REFUSED_ADDRESS = "169.254.169.254";
/** What an allow-all computer loads to show it reaches the public web, unless the config names another page. */
export const DEFAULT_PUBLIC_URL = "https://example.com/";

function reaches(reaching: Reaching, host: string): boolean {
  if (reaching === "allow-all") return true;
  if (reaching === "none") return false;
  return reaching.some((pattern) => covers(pattern, host));
}

/** The first exact name of a site, or undefined for a site that claims wildcards alone. */
function exactName(domains: string[]): string | undefined {
  return domains.find((d) => !isWildcard(d));
}

/** The synthetic name a computer's check loads: its first synthetic start tab, else its first site's first name. */
function syntheticUrl(computer: PlannedComputer): string | undefined {
  const names = Object.values(computer.siteTable).flat();
  for (const tab of computer.startTabs) {
    const host = startTabHost(tab);
    if ("host" in host && tab.startsWith("https://") && names.some((n) => covers(n, host.host))) return tab;
  }
  const name = exactName(names);
  return name === undefined ? undefined : `https://${name}/`;
}

function checksFor(computer: PlannedComputer, websites: PlannedWebsite[], publicUrl: string): SelfTestCheck[] {
  const checks: SelfTestCheck[] = [];
  const synthetic = syntheticUrl(computer);
  if (synthetic !== undefined)
    checks.push({
      name: `synthetic ${new URL(synthetic).host} loads over HTTPS with the env CA`,
      url: synthetic,
      expect: "synthetic-loads",
    });
  // A replayed site is no live one: its names are routed to its recording as a synthetic site's are.
  for (const site of websites.filter(servedLive)) {
    const host = exactName(site.domains);
    if (host === undefined) continue;
    if (reaches(computer.reaching, host))
      checks.push({ name: `live ${host} connects`, url: `https://${host}/`, expect: "live-connects" });
    // Plain HTTP, so the proxy's refusal is an answer the browser shows (a refused CONNECT is only an error page).
    else checks.push({ name: `live ${host} off its reaching is refused`, url: `http://${host}/`, expect: "refused" });
  }
  if (computer.reaching !== "allow-all")
    checks.push({
      name: `${OFF_REACH_HOST}, off its reaching, is refused`,
      url: `http://${OFF_REACH_HOST}/`,
      expect: "refused",
    });
  checks.push({
    name: `the address ${REFUSED_ADDRESS} is refused`,
    url: `http://${REFUSED_ADDRESS}/latest/meta-data/`,
    expect: "refused",
  });
  if (computer.reaching === "allow-all")
    checks.push({ name: `public ${new URL(publicUrl).host} is reached`, url: publicUrl, expect: "public-reached" });
  return checks;
}

/** The self-test of an env: every computer's checks, and its start tabs for the card check. */
export function selfTestPlan(
  computers: PlannedComputer[],
  websites: PlannedWebsite[],
  options: { enabled: boolean; publicUrl?: string },
): SelfTestPlan {
  const publicUrl = options.publicUrl ?? DEFAULT_PUBLIC_URL;
  return {
    enabled: options.enabled,
    checks: Object.fromEntries(computers.map((c) => [c.name, checksFor(c, websites, publicUrl)])),
    startTabs: Object.fromEntries(
      computers.filter((c) => c.routesSites && c.startTabs.length > 0).map((c) => [c.name, [...c.startTabs]]),
    ),
  };
}

/** A warning for a self-test page no check would load: selfTest.publicUrl with no allow-all computer. */
export function selfTestWarnings(config: Pick<StackConfig, "selfTest" | "computers">): Problem[] {
  if (typeof config.selfTest !== "object" || config.selfTest.publicUrl === undefined) return [];
  if (Object.values(config.computers).some((c) => c.network === "allow-all")) return [];
  return [
    problem(
      ["selfTest", "publicUrl"],
      "is loaded only by an allow-all computer's check, and no computer is allow-all, so it is never used; remove it",
    ),
  ];
}
