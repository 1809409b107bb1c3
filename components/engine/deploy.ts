// The Docker-engine family deployed on the engines its target gives (an EnvTarget: the docker, hosts or ec2 target,
// picked by components/targets.ts): the websites, the gateway and the computers on them, wired as the plan says;
// what MultiEnv needs of them handed back as Deployed.
import * as pulumi from "@pulumi/pulumi";
import {
  browserServiceConfig,
  engineMachines,
  gatewayConfigOnHosts,
  gatewayServiceConfig,
  siteProxyConfigOnHosts,
  siteProxyServiceConfig,
} from "../../src/plan";
import type { DeployArgs, Deployed } from "../deployed";
import type { EnvTarget } from "./envTarget";
import { Computer } from "./computer";
import { Gateway } from "./gateway";
import { Website } from "./website";

/** The env on Docker engines (docker, ec2 and hosts targets): the websites, gateway and computers on `engines`. */
export function deployOnEngines(owner: string, args: DeployArgs, engines: EnvTarget): Deployed {
  const { plan, parent } = args;
  const websites = plan.websites.map(
    (site) =>
      new Website(
        `${owner}-${site.name}`,
        {
          plan,
          site,
          engine: engines.env,
          secrets: args.secrets,
          account: args.accounts?.[site.name],
          controlToken: args.controlToken,
        },
        { parent, aliases: [{ name: site.name }] },
      ),
  );

  const gatewayConfig = pulumi
    .all(Object.fromEntries(plan.computers.map((c) => [c.name, engines.computerAddress(c)])))
    .apply((addresses) => gatewayConfigOnHosts(gatewayServiceConfig(plan), addresses));
  const gateway = new Gateway(
    `${owner}-gateway`,
    {
      plan,
      engine: engines.env,
      serviceConfig: gatewayConfig,
      controlToken: args.controlToken,
      reachedAt: engines.gatewayReachedAt,
    },
    { parent },
  );

  const computerHosts = pulumi.all(plan.computers.map((c) => engines.computerAddress(c)));
  const computers = plan.computers.map((computer) => {
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
      `${owner}-${computer.name}`,
      {
        plan,
        computer,
        engine: engines.computer(computer),
        proxyConfig,
        controlToken: args.controlToken,
        browserConfig: browserServiceConfig(plan, computer),
        dependsOn: [gateway],
      },
      { parent, aliases: [{ name: computer.name }] },
    );
  });

  return {
    gatewayUrl: gateway.url,
    underTest: [gateway.container, ...computers.flatMap((c) => [c.proxy, c.browser])],
    // The websites too: their captures are collected before a container of theirs is removed.
    collectedFrom: [gateway, ...websites, ...computers],
    gatewayTunnel: engines.gatewayTunnel,
  };
}
