// The multi env of one task: everything a Plan describes, on Docker engines (local, EC2 VMs, SSH hosts) or on a
// Kubernetes cluster. It decides nothing: the plan says what exists and how it is wired (src/plan), the plan's target
// deploys it (targets.ts: engine/deploy.ts on Docker engines, kubernetes/deploy.ts on a cluster), and this adds what
// every target shares (the control token, the self-test, the capture collector) and the stack outputs of
// docs/design.md "Outputs".
import * as pulumi from "@pulumi/pulumi";
import type { LiveReason, LiveWebsiteMark, ReplayedWebsiteMark } from "../src/plan";
import type { GatewayTunnel } from "../src/plan/targets/ssh";
import { computerCdpUrl, siteUrls } from "../src/plan/urls";
import { computerAgentToken } from "../src/protocol/auth";
import type { AgentTokensOutput, ComputerOutput, SelfTestOutput, WebsiteOutput } from "../src/plan/stack-outputs";
import type { GatewayPortForward } from "../src/protocol/port-forward";
import { CaptureCollector } from "./captureCollector";
import type { DeployArgs } from "./deployed";
import { ControlToken } from "./controlToken";
import { SelfTest } from "./selfTest";
import { deployOnTarget } from "./targets";

/** What MultiEnv deploys from: what its target's family of parts does, less what MultiEnv itself gives them. */
export type MultiEnvArgs = Omit<DeployArgs, "controlToken" | "parent">;

/** The stack outputs (docs/design.md "Outputs"). */
export interface MultiEnvOutputs {
  gatewayUrl: pulumi.Output<string>;
  controlToken: pulumi.Output<string>;
  /** Computer -> its agent token (a secret): what opens that computer's DevTools (`cdpUrl`) and nothing else. */
  agentTokens: pulumi.Output<AgentTokensOutput>;
  websites: pulumi.Output<Record<string, WebsiteOutput>>;
  computers: pulumi.Output<Record<string, ComputerOutput>>;
  /** True when the env is live: a live site served live, or a computer that reaches the public web. */
  live: boolean;
  /** Why the env is live, one reason per live site and per computer reaching the public web (which and how). */
  liveReasons: LiveReason[];
  liveWebsites: LiveWebsiteMark[];
  /** Live sites served from a recording: no longer live. */
  replayedWebsites: ReplayedWebsiteMark[];
  /** False when the env is live. */
  reproducible: boolean;
  captureTraffic: boolean;
  /** What the deploy's self-test found, or that it was skipped. */
  selfTest: pulumi.Output<SelfTestOutput>;
  /** Remote hosts: the SSH tunnel the runner reaches `gatewayUrl` through (the runner brings it up again as needed). */
  gatewayTunnel?: pulumi.Input<GatewayTunnel>;
  /** Kubernetes: the gateway's pod, which the runner reaches by a port-forward through the API server. */
  gatewayPortForward?: pulumi.Input<GatewayPortForward>;
}

/** The multi env of one task: its target's parts, its self-test and its capture collector. */
export class MultiEnv extends pulumi.ComponentResource {
  readonly controlToken: ControlToken;
  readonly outputs: MultiEnvOutputs;

  constructor(name: string, args: MultiEnvArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:index:MultiEnv", name, {}, opts);
    const { plan } = args;
    this.controlToken = new ControlToken(`${name}-control-token`, {}, { parent: this });
    const deployed = deployOnTarget(name, { ...args, controlToken: this.controlToken.value, parent: this });
    const { gatewayUrl } = deployed;
    const selfTest = plan.selfTest.enabled
      ? new SelfTest(
          `${name}-self-test`,
          {
            selfTest: plan.selfTest,
            gatewayUrl,
            controlToken: this.controlToken.value,
            containers: deployed.underTest,
            ...(deployed.deployed ? { deployed: deployed.deployed } : {}),
            ...(deployed.gatewayPortForward ? { gatewayPortForward: deployed.gatewayPortForward } : {}),
          },
          { parent: this },
        )
      : undefined;
    // Collects on a plain `pulumi destroy`: deleted first, since it depends on the gateway and the computers. There
    // is something to collect when the env captures traffic or its computers keep request logs.
    if (plan.capture.enabled || (plan.requestLog !== undefined && plan.computers.length > 0))
      new CaptureCollector(
        `${name}-capture-collector`,
        {
          plan,
          gatewayUrl,
          controlToken: this.controlToken.value,
          gatewayTunnel: deployed.gatewayTunnel,
          gatewayPortForward: deployed.gatewayPortForward,
        },
        { parent: this, dependsOn: deployed.collectedFrom },
      );
    this.outputs = {
      gatewayUrl,
      controlToken: this.controlToken.value,
      // Derived as the gateway derives them at start (src/gateway/access.ts), so nothing else carries them.
      agentTokens: pulumi.secret(
        this.controlToken.value.apply((token) =>
          Object.fromEntries(plan.computers.map((c) => [c.name, computerAgentToken(token, c.name)])),
        ),
      ),
      websites: gatewayUrl.apply((url) =>
        Object.fromEntries(
          plan.websites.map((w) => [
            w.name,
            {
              live: w.live && w.replay === undefined,
              // A replayed site answers at its allowed hosts too (routed inside the env, never public).
              ...(w.replay ? { replayed: true, allowHosts: [...w.allowHosts] } : {}),
              domains: [...w.domains],
              ...siteUrls(url, w),
            },
          ]),
        ),
      ),
      computers: gatewayUrl.apply((url) =>
        Object.fromEntries(
          plan.computers.map((c) => [
            c.name,
            {
              network: c.network,
              reaching: c.reaching,
              siteTable: c.siteTable,
              startTabs: [...c.startTabs],
              cdpUrl: computerCdpUrl(url, c.name),
            },
          ]),
        ),
      ),
      live: plan.live,
      liveReasons: plan.liveReasons,
      liveWebsites: plan.liveWebsites,
      replayedWebsites: plan.replayedWebsites,
      reproducible: plan.reproducible,
      captureTraffic: plan.capture.enabled,
      selfTest: selfTest ? selfTest.results : pulumi.output({ skipped: true as const }),
      ...(deployed.gatewayTunnel !== undefined ? { gatewayTunnel: deployed.gatewayTunnel } : {}),
      ...(deployed.gatewayPortForward !== undefined ? { gatewayPortForward: deployed.gatewayPortForward } : {}),
    };
    this.registerOutputs({ ...this.outputs });
  }
}
