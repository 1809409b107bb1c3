// The multi env of one task: everything a Plan describes, on the local Docker engine or on EC2 VMs.
// It decides nothing: the plan says what exists, src/plan/layout.ts how it is wired, and this component
// creates the resources in that shape and exposes the stack outputs of DESIGN "Outputs".
import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import type { LiveWebsiteMark, Plan, PlannedComputer, Reaching } from "../src/plan";
import { browserServiceConfig, gatewayServiceConfig, siteProxyServiceConfig } from "../src/plan";
import {
  EC2_DEFAULT_AMI_PARAMETER,
  EC2_SSH_USER,
  awsTags,
  computerCdpUrl,
  computerEngineNetworks,
  computerPeer,
  ec2UserData,
  envEngineNetworks,
  projectImagesNeeded,
  rehost,
  siteUrls,
} from "../src/plan/layout";
import { LABELS } from "../policies/contract";
import type { EngineTarget } from "../src/providers/docker-api";
import { CaptureCollector } from "./captureCollector";
import { Computer } from "./computer";
import { ControlToken } from "./controlToken";
import { DockerEngine } from "./dockerEngine";
import { Ec2Firewall } from "./ec2Firewall";
import { Ec2Host } from "./ec2Host";
import { Gateway } from "./gateway";
import { Website } from "./website";

export interface MultiEnvArgs {
  /** What to deploy, from `plan()`; must be an accepted plan. */
  plan: Plan;
  /** Secret stack config values by config key (namespace `multienv`), for the sites' `secretSettings`. */
  secrets: Record<string, pulumi.Output<string>>;
  /** Build context of the project's images: the repository root, relative to the project directory Pulumi runs in. */
  buildContext: string;
  /** The `BASE_IMAGE` build argument of the project's Dockerfiles. */
  baseImage: string;
  /** The runner's engine (docker target: where the env runs; ec2: where images are built): unset, DOCKER_HOST or the local socket. */
  dockerHost?: string;
}

export interface WebsiteOutput {
  live: boolean;
  domains: string[];
  svcUrl: string;
  /** Synthetic sites only. */
  browseUrl?: string;
}

export interface ComputerOutput {
  network: PlannedComputer["network"];
  reaching: Reaching;
  siteTable: Record<string, string[]>;
  cdpUrl: string;
}

/** The stack outputs (DESIGN "Outputs"). */
export interface MultiEnvOutputs {
  gatewayUrl: pulumi.Output<string>;
  controlToken: pulumi.Output<string>;
  websites: pulumi.Output<Record<string, WebsiteOutput>>;
  computers: pulumi.Output<Record<string, ComputerOutput>>;
  live: boolean;
  liveWebsites: LiveWebsiteMark[];
  reproducible: boolean;
  captureTraffic: boolean;
}

export class MultiEnv extends pulumi.ComponentResource {
  readonly gateway: Gateway;
  readonly websites: Website[];
  readonly computers: Computer[];
  readonly controlToken: ControlToken;
  readonly outputs: MultiEnvOutputs;

  constructor(name: string, args: MultiEnvArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:index:MultiEnv", name, {}, opts);
    const { plan } = args;
    if (plan.target === "ec2" && plan.ec2 === undefined) {
      throw new Error("multienv:ec2: target is ec2 and the ec2 settings are missing; set multienv:ec2 (region, instanceType, runnerCidrs, sshPublicKey)");
    }
    this.controlToken = new ControlToken(`${plan.stack}-control-token`, {}, { parent: this });
    const secretValues = (siteName: string, mapping: Record<string, string>) =>
      Object.fromEntries(
        Object.entries(mapping).map(([setting, key]) => {
          const value = args.secrets[key];
          if (value === undefined) {
            throw new Error(`multienv:websites.${siteName}.secretSettings.${setting}: the secret config key ${key} has no value; run pulumi config set --secret ${key} <value>`);
          }
          return [setting, value];
        }),
      );

    const engines = plan.target === "docker" ? this.dockerEngines(args) : this.ec2Engines(args);
    this.websites = plan.websites.map(
      (site) =>
        new Website(site.name, { plan, site, engine: engines.env, secretValues: secretValues(site.name, site.secretSettings) }, { parent: this }),
    );

    const gatewayConfig = pulumi
      .all(Object.fromEntries(plan.computers.map((c) => [c.name, engines.computerAddress(c)])))
      .apply((addresses) => {
        const config = gatewayServiceConfig(plan);
        for (const [computer, address] of Object.entries(addresses)) {
          if (address === undefined) continue;
          const endpoints = config.computers[computer];
          config.computers[computer] = { cdp: rehost(endpoints.cdp, address), proxyLog: rehost(endpoints.proxyLog, address) };
        }
        return config;
      });
    this.gateway = new Gateway(
      plan.gateway.containerName,
      {
        plan,
        engine: engines.env,
        serviceConfig: gatewayConfig,
        controlToken: this.controlToken.value,
        publicAddress: engines.gatewayPublicAddress,
        dependsOn: this.websites.flatMap((w) => w.containers()),
      },
      { parent: this },
    );

    this.computers = plan.computers.map((computer) => {
      const proxyConfig = pulumi.output(engines.gatewayPrivateAddress).apply((address) => {
        const config = siteProxyServiceConfig(plan, computer);
        return address === undefined ? config : { ...config, gateway: rehost(config.gateway, address) };
      });
      return new Computer(
        computer.name,
        { plan, computer, engine: engines.computer(computer), proxyConfig, browserConfig: browserServiceConfig(plan, computer), dependsOn: [this.gateway] },
        { parent: this },
      );
    });

    const gatewayUrl = this.gateway.url;
    // Collects on a plain `pulumi destroy`: deleted first, since it depends on the gateway and the computers.
    if (plan.capture.enabled) new CaptureCollector(`${plan.stack}-capture-collector`, { plan, gatewayUrl, controlToken: this.controlToken.value }, { parent: this, dependsOn: [this.gateway, ...this.computers] });
    this.outputs = {
      gatewayUrl,
      controlToken: this.controlToken.value,
      websites: gatewayUrl.apply((url) =>
        Object.fromEntries(plan.websites.map((w) => [w.name, { live: w.live, domains: [...w.domains], ...siteUrls(url, w) }])),
      ),
      computers: gatewayUrl.apply((url) =>
        Object.fromEntries(
          plan.computers.map((c) => [
            c.name,
            { network: c.network, reaching: c.reaching, siteTable: c.siteTable, cdpUrl: computerCdpUrl(url, c.name) },
          ]),
        ),
      ),
      live: plan.live,
      liveWebsites: plan.liveWebsites,
      reproducible: plan.reproducible,
      captureTraffic: plan.capture.enabled,
    };
    this.registerOutputs({ ...this.outputs });
  }

  /** docker target: one engine, the local one, holding every network, volume and container. */
  private dockerEngines(args: MultiEnvArgs): Engines {
    const { plan } = args;
    const env = new DockerEngine(
      `${plan.stack}-engine`,
      {
        target: localTarget(args.dockerHost),
        networks: envEngineNetworks(plan),
        volumes: [...(plan.capture.enabled ? [plan.capture.volumeName] : []), ...plan.computers.map((c) => c.caVolumeName)],
        projectImages: projectImagesNeeded(true, plan.computers),
        buildContext: args.buildContext,
        baseImage: args.baseImage,
        labels: { [LABELS.stack]: plan.stack },
      },
      { parent: this },
    );
    return {
      env,
      computer: () => env,
      computerAddress: () => undefined,
      gatewayPrivateAddress: undefined,
      gatewayPublicAddress: undefined,
    };
  }

  /** ec2 target: a VM for the env and one per computer, each with its own engine and security group. */
  private ec2Engines(args: MultiEnvArgs): Engines {
    const { plan } = args;
    const ec2 = plan.ec2!;
    const tags = (name: string) => awsTags(plan, name);
    const awsProvider = new aws.Provider(`${plan.stack}-aws`, { region: ec2.region as aws.Region }, { parent: this });
    const awsOpts = { parent: this, providers: { aws: awsProvider } };
    const firewall = new Ec2Firewall(`${plan.stack}-firewall`, { plan }, awsOpts);
    const ami: pulumi.Input<string> =
      ec2.ami ?? aws.ssm.getParameterOutput({ name: EC2_DEFAULT_AMI_PARAMETER }, { parent: this, provider: awsProvider }).value;
    const host = (name: string, key: string) =>
      new Ec2Host(
        name,
        {
          instanceType: ec2.instanceType,
          ami,
          subnetId: ec2.subnetId,
          securityGroupId: firewall.groupId(key),
          sshPublicKey: ec2.sshPublicKey,
          sshUser: EC2_SSH_USER,
          userData: ec2UserData(),
          tags,
          readyAfter: firewall.rules,
        },
        awsOpts,
      );
    const engineArgs = { buildContext: args.buildContext, baseImage: args.baseImage, labels: { [LABELS.stack]: plan.stack } };
    // Every image is built or pulled on the runner's engine and copied to the VMs that run it (see DockerEngine).
    const images = new DockerEngine(
      `${plan.stack}-images`,
      { ...engineArgs, target: localTarget(args.dockerHost), networks: { internal: [], external: [] }, volumes: [], projectImages: projectImagesNeeded(true, plan.computers) },
      { parent: this },
    );
    const imagesFor = (vm: Ec2Host) => ({ engine: images, sshTarget: vm.sshTarget, after: [vm.ready] });
    const envHost = host(`${plan.stack}-env`, "env");
    const env = new DockerEngine(
      `${plan.stack}-env-engine`,
      {
        ...engineArgs,
        target: envHost.target,
        networks: envEngineNetworks(plan),
        volumes: plan.capture.enabled ? [plan.capture.volumeName] : [],
        projectImages: [],
        imagesFrom: imagesFor(envHost),
      },
      { parent: this },
    );
    const computerHosts = new Map<string, Ec2Host>();
    const computerEngines = new Map<string, DockerEngine>();
    for (const computer of plan.computers) {
      const vm = host(`${plan.stack}-${computer.name}`, computerPeer(computer.name));
      computerHosts.set(computer.name, vm);
      computerEngines.set(
        computer.name,
        new DockerEngine(
          `${plan.stack}-${computer.name}-engine`,
          {
            ...engineArgs,
            target: vm.target,
            networks: computerEngineNetworks(plan, computer),
            volumes: [computer.caVolumeName],
            projectImages: [],
            imagesFrom: imagesFor(vm),
          },
          { parent: this },
        ),
      );
    }
    return {
      env,
      computer: (c) => computerEngines.get(c.name)!,
      computerAddress: (c) => computerHosts.get(c.name)!.privateIp,
      gatewayPrivateAddress: envHost.privateIp,
      gatewayPublicAddress: envHost.publicIp,
    };
  }
}

/** The runner's own engine: `host` when given (a unix:// socket or an ssh:// host), else DOCKER_HOST or the local socket. */
function localTarget(host: string | undefined): EngineTarget {
  return host === undefined ? {} : { host };
}

interface Engines {
  /** The engine of the gateway and the sites. */
  env: DockerEngine;
  /** The engine a computer runs on. */
  computer: (computer: PlannedComputer) => DockerEngine;
  /** ec2: the private address of a computer's VM, where its proxy's relay and control ports are published. */
  computerAddress: (computer: PlannedComputer) => pulumi.Input<string | undefined>;
  /** ec2: the env VM's private address, where computer VMs reach the gateway. */
  gatewayPrivateAddress: pulumi.Input<string> | undefined;
  /** ec2: the env VM's public address, where the runner reaches the gateway. */
  gatewayPublicAddress: pulumi.Input<string> | undefined;
}

