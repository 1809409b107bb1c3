// A computer: its browser and the site proxy that is the browser's only way out. The browser sits on the
// computer's own internal network alone with its proxy; the proxy also reaches the gateway (and the web when
// the computer reaches public hosts). The proxy writes its CA into the computer's CA volume, which the
// browser mounts read-only to trust it.
import * as pulumi from "@pulumi/pulumi";
import type { BrowserServiceConfig, Plan, PlannedComputer, SiteProxyServiceConfig } from "../../src/plan";
import {
  browserMounts,
  browserNetworks,
  DEFAULT_CAPABILITIES,
  proxyMounts,
  proxyNetworks,
  proxyPublish,
} from "../../src/plan/wiring";
import { ENV_VARS } from "../../src/protocol/env";
import { LABELS, ROLES } from "../../src/protocol/labels";
import * as docker from "@pulumi/docker";
import { computerControlToken } from "../../src/protocol/auth";
import { containerLabels, containerOptions, envEntry, networksAdvanced, RESTART, volumeMounts } from "./containers";
import type { DockerEngine } from "./engine";

export interface ComputerArgs {
  /** The plan's target (how the proxy is wired and published). */
  plan: Pick<Plan, "target">;
  /** The planned computer. */
  computer: PlannedComputer;
  /** The engine the computer runs on: the env's (docker) or the computer's own VM (ec2). */
  engine: DockerEngine;
  /**
   * `MULTIENV_SITE_PROXY_CONFIG`, from `siteProxyServiceConfig(plan, computer)` (ec2: with the gateway VM's address).
   */
  proxyConfig: pulumi.Input<SiteProxyServiceConfig>;
  /** The env's control token (a secret): the proxy gets this computer's own token derived from it. */
  controlToken: pulumi.Output<string>;
  /** `MULTIENV_BROWSER_CONFIG`, from `browserServiceConfig(plan, computer)`. */
  browserConfig: BrowserServiceConfig;
  /** Resources the proxy needs before it starts (docker: the gateway it forwards synthetic names to). */
  dependsOn?: pulumi.Resource[];
}

/** A computer: its site proxy (the only way out of its network) and its browser, which trusts the proxy's CA. */
export class Computer extends pulumi.ComponentResource {
  readonly proxy: docker.Container;
  readonly browser: docker.Container;

  constructor(name: string, args: ComputerArgs, opts?: pulumi.ComponentResourceOptions) {
    super("multienv:computer:Computer", name, {}, opts);
    const { plan, computer, engine } = args;
    const browserNets = browserNetworks(computer);
    if (browserNets.some((n) => n.network !== computer.networkName)) {
      throw new pulumi.ResourceError(
        `Computer ${computer.name}: the browser may only be on its own network ${computer.networkName}`,
        this,
      );
    }
    const proxyConfigJson = pulumi.output(args.proxyConfig).apply((c) => JSON.stringify(c));
    this.proxy = new docker.Container(
      `${name}-proxy`,
      {
        name: computer.proxyContainerName,
        image: engine.image(undefined, "site-proxy"),
        networksAdvanced: networksAdvanced(engine, proxyNetworks(plan, computer)),
        ports: proxyPublish(plan),
        mounts: volumeMounts(engine, proxyMounts(computer)),
        capabilities: DEFAULT_CAPABILITIES,
        envs: [
          envEntry(ENV_VARS.siteProxyConfig, proxyConfigJson),
          envEntry(
            ENV_VARS.siteProxyToken,
            pulumi.secret(args.controlToken.apply((token) => computerControlToken(token, computer.name))),
          ),
        ],
        restart: RESTART,
        labels: containerLabels(engine, { [LABELS.role]: ROLES.siteProxy, [LABELS.computer]: computer.name }),
      },
      // The computer's token is in envs: the engine keeps envs secret even if a wrapper were lost (policy
      // secrets-stay-secret).
      { parent: this, ...containerOptions(engine), dependsOn: args.dependsOn, additionalSecretOutputs: ["envs"] },
    );
    this.browser = new docker.Container(
      `${name}-browser`,
      {
        name: computer.browserContainerName,
        image: engine.image(computer.image, "browser"),
        networksAdvanced: networksAdvanced(engine, browserNets),
        mounts: volumeMounts(engine, browserMounts(computer)),
        capabilities: DEFAULT_CAPABILITIES,
        envs: [envEntry(ENV_VARS.browserConfig, JSON.stringify(args.browserConfig))],
        // Chromium needs more than Docker's 64 MB default /dev/shm for real pages.
        shmSize: 512,
        // An init as PID 1 reaps the processes a Chromium ended at each reset leaves behind; the launcher (Node) does
        // not, and a warm env resets thousands of times.
        init: true,
        restart: RESTART,
        labels: containerLabels(engine, { [LABELS.role]: ROLES.browser, [LABELS.computer]: computer.name }),
      },
      // The browser's proxy must be up first: the browser never falls back to a direct connection.
      { parent: this, ...containerOptions(engine), dependsOn: [this.proxy] },
    );
    this.registerOutputs({ proxy: this.proxy.name, browser: this.browser.name });
  }
}
