// The multi env of one task: everything a Plan describes, on the local Docker engine or on EC2 VMs.
// It decides nothing: the plan says what exists and how it is wired (src/plan/wiring.ts, ec2.ts), and this component
// creates the resources in that shape and exposes the stack outputs of docs/design.md "Outputs".
import * as pulumi from "@pulumi/pulumi";
import type { EngineMachine, LiveWebsiteMark, Plan } from "../src/plan";
import {
  browserServiceConfig,
  engineMachines,
  gatewayConfigOnHosts,
  gatewayServiceConfig,
  siteProxyConfigOnHosts,
  siteProxyServiceConfig,
} from "../src/plan";
import { computerCdpUrl, siteUrls } from "../src/plan/urls";
import { computerAgentToken } from "../src/protocol/auth";
import { CaptureCollector } from "./captureCollector";
import { Computer } from "./computer";
import { ControlToken } from "./controlToken";
import { envTargetFor } from "./envTarget";
import { Gateway } from "./gateway";
import { SelfTest } from "./selfTest";
import type { AgentTokensOutput, ComputerOutput, SelfTestOutput, WebsiteOutput } from "../src/protocol/outputs";
import type { GatewayTunnel } from "../src/plan/ssh";
import { Website } from "./website";
import { KubernetesComputer } from "./kubernetesComputer";
import { KubernetesGateway } from "./kubernetesGateway";
import { KubernetesTarget } from "./kubernetesTarget";
import { KubernetesWebsite } from "./kubernetesWebsite";
import {
  kubernetesBrowserConfig,
  kubernetesGatewayConfig,
  kubernetesSiteProxyConfig,
} from "../src/plan/kubernetes-services";
import type { GatewayPortForward } from "../src/protocol/port-forward";

export interface MultiEnvArgs {
  /** What to deploy, from `plan()`; must be an accepted plan. */
  plan: Plan;
  /** Secret stack config values by config key (namespace `multienv`), for the sites' `secretSettings`. */
  secrets: Record<string, pulumi.Output<string>>;
  /** Build context of the project's images: the repository root, relative to the project directory Pulumi runs in. */
  buildContext: string;
  /** The `BASE_IMAGE` build argument of the project's Dockerfiles. */
  baseImage: string;
  /**
   * The runner's engine (docker target: where the env runs; ec2: where images are built): unset, DOCKER_HOST or the
   * local socket.
   */
  dockerHost?: string;
  /** Docker target: the machine its engine runs on, whose addresses no site proxy may dial. */
  engineMachine?: EngineMachine;
}

/** The stack outputs (docs/design.md "Outputs"). */
export interface MultiEnvOutputs {
  gatewayUrl: pulumi.Output<string>;
  controlToken: pulumi.Output<string>;
  /** Computer -> its agent token (a secret): what opens that computer's DevTools (`cdpUrl`) and nothing else. */
  agentTokens: pulumi.Output<AgentTokensOutput>;
  websites: pulumi.Output<Record<string, WebsiteOutput>>;
  computers: pulumi.Output<Record<string, ComputerOutput>>;
  live: boolean;
  liveWebsites: LiveWebsiteMark[];
  reproducible: boolean;
  captureTraffic: boolean;
  /** What the deploy's self-test found, or that it was skipped. */
  selfTest: pulumi.Output<SelfTestOutput>;
  /** Remote hosts: the SSH tunnel the runner reaches `gatewayUrl` through (the runner brings it up again as needed). */
  gatewayTunnel?: pulumi.Input<GatewayTunnel>;
  /** Kubernetes: the gateway's pod, which the runner reaches by a port-forward through the API server. */
  gatewayPortForward?: pulumi.Input<GatewayPortForward>;
}

/** What the target's part of the env gives the parts every target shares (self-test, collector, outputs). */
interface Deployed {
  gatewayUrl: pulumi.Output<string>;
  /** What the self-test runs through: the gateway, and each computer's proxy and browser. */
  underTest: pulumi.CustomResource[];
  /** What identifies them as deployed, when their ids stay the same across a replacement. */
  deployed?: pulumi.Input<string>[];
  /** What the collector collects from: it is deleted before them. */
  collectedFrom: pulumi.Resource[];
  gatewayTunnel?: pulumi.Input<GatewayTunnel>;
  gatewayPortForward?: pulumi.Input<GatewayPortForward>;
}

/** The multi env of one task: its targets' engines, websites, gateway, computers, self-test and capture collector. */
export class MultiEnv extends pulumi.ComponentResource {
  /** The docker, ec2 and hosts targets: the gateway, websites and computers on Docker engines. */
  gateway!: Gateway;
  websites: Website[] = [];
  computers: Computer[] = [];
  readonly controlToken: ControlToken;
  readonly outputs: MultiEnvOutputs;

  constructor(name: string, args: MultiEnvArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:index:MultiEnv", name, {}, opts);
    const { plan } = args;
    this.controlToken = new ControlToken(`${name}-control-token`, {}, { parent: this });
    const deployed = plan.target === "kubernetes" ? this.onCluster(name, args) : this.onEngines(name, args);
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
          plan.websites.map((w) => [w.name, { live: w.live, domains: [...w.domains], ...siteUrls(url, w) }]),
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
      liveWebsites: plan.liveWebsites,
      reproducible: plan.reproducible,
      captureTraffic: plan.capture.enabled,
      selfTest: selfTest ? selfTest.results : pulumi.output({ skipped: true as const }),
      ...(deployed.gatewayTunnel !== undefined ? { gatewayTunnel: deployed.gatewayTunnel } : {}),
      ...(deployed.gatewayPortForward !== undefined ? { gatewayPortForward: deployed.gatewayPortForward } : {}),
    };
    this.registerOutputs({ ...this.outputs });
  }

  /** The env on Docker engines (the docker, ec2 and hosts targets). */
  private onEngines(name: string, args: MultiEnvArgs): Deployed {
    const { plan } = args;
    const engines = envTargetFor(
      {
        plan,
        buildContext: args.buildContext,
        baseImage: args.baseImage,
        runnerEngine: args.dockerHost === undefined ? {} : { host: args.dockerHost },
      },
      { parent: this },
      name,
    );
    this.websites = plan.websites.map(
      (site) =>
        new Website(
          `${name}-${site.name}`,
          { plan, site, engine: engines.env, secrets: args.secrets },
          { parent: this, aliases: [{ name: site.name }] },
        ),
    );

    const gatewayConfig = pulumi
      .all(Object.fromEntries(plan.computers.map((c) => [c.name, engines.computerAddress(c)])))
      .apply((addresses) => gatewayConfigOnHosts(gatewayServiceConfig(plan), addresses));
    this.gateway = new Gateway(
      `${name}-gateway`,
      {
        plan,
        engine: engines.env,
        serviceConfig: gatewayConfig,
        controlToken: this.controlToken.value,
        reachedAt: engines.gatewayReachedAt,
        dependsOn: this.websites.flatMap((w) => w.containers()),
      },
      { parent: this },
    );

    const computerHosts = pulumi.all(plan.computers.map((c) => engines.computerAddress(c)));
    this.computers = plan.computers.map((computer) => {
      // Known only once the networks (and on ec2 the VMs) exist.
      const known = pulumi.all([
        engines.computer(computer).networkSubnets(),
        engines.gatewayPrivateAddress,
        computerHosts,
      ]);
      const proxyConfig = known.apply(([subnets, envHost, hosts]) =>
        siteProxyConfigOnHosts(siteProxyServiceConfig(plan, computer), {
          subnets,
          envHost,
          computerHosts: hosts,
          machines: engineMachines(plan, args.engineMachine),
        }),
      );
      return new Computer(
        `${name}-${computer.name}`,
        {
          plan,
          computer,
          engine: engines.computer(computer),
          proxyConfig,
          controlToken: this.controlToken.value,
          browserConfig: browserServiceConfig(plan, computer),
          dependsOn: [this.gateway],
        },
        { parent: this, aliases: [{ name: computer.name }] },
      );
    });

    return {
      gatewayUrl: this.gateway.url,
      underTest: [this.gateway.container, ...this.computers.flatMap((c) => [c.proxy, c.browser])],
      collectedFrom: [this.gateway, ...this.computers],
      gatewayTunnel: engines.gatewayTunnel,
    };
  }

  /** The env on a Kubernetes cluster: a namespace of pods walled by NetworkPolicies. */
  private onCluster(name: string, args: MultiEnvArgs): Deployed {
    const { plan } = args;
    const target = new KubernetesTarget(name, { plan }, { parent: this });
    const websites = plan.websites.map(
      (site) =>
        new KubernetesWebsite(
          `${name}-${site.name}`,
          { plan, site, target, secrets: args.secrets, controlToken: this.controlToken.value },
          { parent: this },
        ),
    );
    const gateway = new KubernetesGateway(
      `${name}-gateway`,
      {
        plan,
        target,
        serviceConfig: kubernetesGatewayConfig(plan),
        controlToken: this.controlToken.value,
        dependsOn: websites.flatMap((w) => w.pods),
      },
      { parent: this },
    );
    const computers = plan.computers.map(
      (computer) =>
        new KubernetesComputer(
          `${name}-${computer.name}`,
          {
            plan,
            computer,
            target,
            proxyConfig: kubernetesSiteProxyConfig(plan, computer),
            browserConfig: kubernetesBrowserConfig(plan, computer),
            controlToken: this.controlToken.value,
            dependsOn: [gateway],
          },
          { parent: this },
        ),
    );
    const underTest = [gateway.pod, ...computers.flatMap((c) => [c.proxy, c.browser])];
    return {
      gatewayUrl: gateway.url,
      underTest,
      // A pod's id is its namespace and name, the same after a replacement: its uid tells them apart.
      deployed: underTest.map((pod) => pod.metadata.uid),
      collectedFrom: [gateway, ...computers],
      gatewayPortForward: gateway.portForward,
    };
  }
}
