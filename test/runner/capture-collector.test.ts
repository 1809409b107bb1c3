// The capture collector: the program declares it (under Pulumi's mocks) only when capture is on or the computers
// keep request logs, with the
// delete step and the environment `multienv collect --from-env` reads back. Running that delete step for real
// is in cli.test.ts.
import { describe, expect, it } from "vitest";
import {
  captureCollectorCommands,
  captureCollectorEnvironment,
  COLLECTOR_ENV,
  readCollectorEnvironment,
  type CollectorContext,
} from "../../src/plan/collector";
import { graphOf, resource } from "../components/helpers";

const CONFIG = {
  target: "docker",
  captureTraffic: true,
  websites: {
    shop: {
      domains: ["shop.test", "*.shop.test"],
      server: { image: "multienv/sample-shop-server" },
      frontend: { image: "multienv/sample-shop-frontend" },
    },
    github: { live: true, domains: ["github.com"], server: { image: "multienv/sample-live-server" } },
  },
  computers: { desktop: { network: "allow-all" }, offline: { network: "none" } },
};

const DELETE_STEP = "pulumi-nodejs:dynamic/multienv:Command";

describe("capture collector in the program", () => {
  it("is declared when capture is on, its delete step running the collection with the env's context, the token kept secret", async () => {
    const graph = await graphOf("cc1", CONFIG, {}, true);
    const step = resource(graph, DELETE_STEP, "cc1-capture-collector-delete-step");
    expect(step.parentType).toBe("multienv:index:CaptureCollector");
    expect(step.inputs.delete).toBe("node bin/multienv.js collect --from-env --end-connections");
    expect(step.additionalSecretOutputs).toEqual(["environment"]);
    const revealed = step.inputs.environment as Record<string, Record<string, string>>;
    expect(Object.keys(revealed)).toEqual(["[secret]"]);
    const environment = revealed["[secret]"];
    expect(environment[COLLECTOR_ENV.stack]).toBe("cc1");
    const context = JSON.parse(environment[COLLECTOR_ENV.context]) as CollectorContext;
    expect(context).toEqual({
      computers: ["desktop", "offline"],
      syntheticDomains: ["shop.test", "*.shop.test"],
      replayedSites: [],
      live: true,
      liveReasons: [
        ...context.liveReasons!.filter((r) => "computer" in r),
        { website: "github", domains: ["github.com"], why: "live website github (github.com) is served live" },
      ].sort((a, b) => ("website" in a ? -1 : "website" in b ? 1 : 0)),
      liveWebsites: [{ name: "github", domains: ["github.com"], allowHosts: [], reproducible: false }],
      captureTraffic: true,
    });

    const masked = await graphOf("cc1", CONFIG);
    expect(resource(masked, DELETE_STEP, "cc1-capture-collector-delete-step").inputs.environment).toBe("[secret]");
  });

  it("is declared when capture is off but the computers keep request logs (the default), and not when neither", async () => {
    const logs = await graphOf("cc2", { ...CONFIG, captureTraffic: false });
    expect(logs.resources.filter((r) => r.name === "cc2-capture-collector-delete-step")).toHaveLength(1);
    const neither = await graphOf("cc3", { ...CONFIG, captureTraffic: false, requestLog: false });
    expect(neither.resources.filter((r) => r.name.includes("capture-collector"))).toEqual([]);
  });
});

describe("the delete step's command and environment", () => {
  it("adds --fail-on-capture-error only when asked, and reads back what it wrote", () => {
    expect(captureCollectorCommands()).toEqual({
      create: "true",
      delete: "node bin/multienv.js collect --from-env --end-connections",
    });
    expect(captureCollectorCommands({ failOnCaptureError: true }).delete).toBe(
      "node bin/multienv.js collect --from-env --end-connections --fail-on-capture-error",
    );
    const context: CollectorContext = {
      computers: ["a"],
      syntheticDomains: ["shop.test"],
      live: false,
      liveWebsites: [],
      captureTraffic: true,
    };
    const env = captureCollectorEnvironment({
      stack: "s",
      gatewayUrl: "http://127.0.0.1:1",
      controlToken: "t",
      context,
    });
    expect(readCollectorEnvironment(env)).toEqual({
      stack: "s",
      gatewayUrl: "http://127.0.0.1:1",
      controlToken: "t",
      context,
      artifactsDir: undefined,
    });
  });

  it("carries a remote gateway's SSH tunnel, for the delete step to bring up", () => {
    const gatewayTunnel = {
      ssh: { host: "10.0.0.5", user: "ec2-user", hostKey: "ssh-ed25519 AAAA" },
      localPort: 40123,
      remotePort: 8080,
    };
    const env = captureCollectorEnvironment({
      stack: "s",
      gatewayUrl: "http://127.0.0.1:40123",
      controlToken: "t",
      context: {} as CollectorContext,
      gatewayTunnel,
    });
    expect(readCollectorEnvironment(env).gatewayTunnel).toEqual(gatewayTunnel);
    expect(() => readCollectorEnvironment({ ...env, [COLLECTOR_ENV.gatewayTunnel]: "{" })).toThrow(
      /^collect --from-env: MULTIENV_GATEWAY_TUNNEL is not JSON/,
    );
  });

  it("names a context that is not JSON", () => {
    const env = {
      ...captureCollectorEnvironment({
        stack: "s",
        gatewayUrl: "u",
        controlToken: "t",
        context: {} as CollectorContext,
      }),
      [COLLECTOR_ENV.context]: "{",
    };
    expect(() => readCollectorEnvironment(env)).toThrow(/^collect --from-env: MULTIENV_COLLECT_CONTEXT is not JSON/);
  });
});
