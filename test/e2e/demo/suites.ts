// The demo's suites, in the order they run on one deployed env.
import { browsingSuite } from "./browsing";
import { captureSuite } from "./capture";
import { deploySuite } from "./deploy";
import { episodesSuite } from "./episodes";
import { recoverySuite } from "./recovery";
import type { DemoTarget } from "./target";
import { wallsSuite } from "./walls";

/** Registers the demo's suites in the caller's describe, in the order they must run (the disruptive ones last). */
export function demoSuites(t: DemoTarget): void {
  browsingSuite(t);
  wallsSuite(t);
  captureSuite(t);
  deploySuite(t);
  episodesSuite(t);
  recoverySuite(t);
}
