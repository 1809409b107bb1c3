// The demo scenarios (stacks/Pulumi.demo.yaml's topology): what a task's users rely on, checked with a real browser
// through the gateway on a deployed env, as suites grouped by the promise they check, so a failure reads as the
// promise that broke. One deploy serves every suite; the disruptive ones (a stopped site, a killed proxy) run last.
// The same suites run on each target (test/e2e/demo.test.ts on the local engine, demo-hosts.test.ts on stand-in
// VMs); what differs is in DemoTarget: which engine a container is on and how to exec in it (DeployedEnv), how the
// gateway is reached, and on remote hosts the machines' own addresses.
import type { Browser, Page } from "playwright-core";
import { type StackSpec } from "../../../src/runner";
import { addressesOf, type DeployedEnv } from "../helpers/env";

/** What the scenarios need of the target they run on. */
export interface DemoTarget {
  stack: string;
  /** artifacts/<stack>: where the runner stores the run. */
  artifacts: string;
  /** The deployed env (set by the file's beforeAll). */
  env(): DeployedEnv;
  /** The spec it was deployed from. */
  spec(): StackSpec;
  /** A stack file holding that spec's config (for `multienv check`'s rendering of it). */
  stackFile(): string;
  /** The browsers the scenarios opened; the file's afterAll closes them. */
  browsers: Browser[];
  /** The machines a computer's browser must not reach: [address, port] by name. */
  machines(computer: string): Record<string, [string, number]>;
  /** Remote hosts (the hosts target): the machines' addresses. Unset on the local engine. */
  remote?: {
    envAddress: string;
    computerAddress: Record<string, string>;
    /** This machine's end of the SSH tunnel to the gateway. */
    tunnelPort(): number;
    /** The machines' ports a site container must not reach: [address, port] by name. */
    siteProbes(): Record<string, [string, number]>;
    /**
     * Those of siteProbes a site's server may connect to, each answering 401 without the control token: a computer
     * host's control port, which its firewall opens to the env host, and so to whatever leaves the env host by an
     * external network (a live site's server on egress).
     */
    tokenGuarded(site: string): string[];
  };
}

/** What every suite reaches the env through. */
export function demoHelpers(t: DemoTarget) {
  const STACK = t.stack;
  const computer = async (name: string): Promise<Browser> => {
    const browser = await t.env().connect(name);
    t.browsers.push(browser);
    return browser;
  };
  const pages = (browser: Browser): Page[] => browser.contexts().flatMap((c) => c.pages());
  const inspect = (container: string): Promise<any> => t.env().inspect(container);
  const addresses = (container: string) => addressesOf(t.env().apiOf(container), container);
  const websiteContainers = () =>
    ["shop-server", "shop-frontend", "github-server", "gist-server", "gist-frontend"].map((c) => `${STACK}-${c}`);
  return { STACK, computer, pages, inspect, addresses, websiteContainers };
}

/** The first host address of an IPv4 subnet (`10.200.0.0/26` -> `10.200.0.1`). */
export function firstHost(subnet: string): string {
  const [a, b, c, d] = subnet.split("/")[0].split(".").map(Number);
  return [a, b, c, d + 1].join(".");
}
