// The stack the layout tests plan: a synthetic and a live site, and one computer of each network kind.
import type { Plan } from "../../src/plan";
import type { StackConfig } from "../../src/plan/types";
import { planned } from "../helpers/plans";

/** The plan of the layout stack (stack "s"), with `overrides` over its config. */
export function layoutPlan(overrides: Partial<StackConfig> = {}): Plan {
  const config: StackConfig = {
    target: "docker",
    websites: {
      shop: {
        domains: ["shop.test"],
        live: false,
        allowHosts: [],
        server: { image: "s", port: 8000 },
        frontend: { image: "f", port: 80 },
        settings: {},
        secretSettings: {},
      },
      gh: {
        domains: ["github.com"],
        live: true,
        allowHosts: [],
        server: { image: "g", port: 8000 },
        settings: {},
        secretSettings: {},
      },
    },
    computers: {
      wide: { network: "allow-all", routesSites: true, startTabs: [], headful: false },
      listed: { network: ["example.org"], routesSites: true, startTabs: [], headful: false },
      closed: { network: "none", routesSites: true, startTabs: [], headful: false },
    },
    captureTraffic: true,
    capture: { fileSizeMb: 20, fileCount: 10 },
    selfTest: true,
    ...overrides,
  };
  return planned(config, { stack: "s" });
}

export const computer = (p: Plan, name: string) => p.computers.find((c) => c.name === name)!;
export const site = (p: Plan, name: string) => p.websites.find((w) => w.name === name)!;
