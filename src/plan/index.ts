// plan(): everything the components deploy, decided from a validated StackConfig. Pure: no Pulumi, no I/O.
import { captureProblems, captureSidecars, captureWarnings } from "./capture";
import { claimProblems, liveHosts } from "./claims";
import { ec2Problems, ec2Warnings, plannedEc2 } from "./targets/ec2";
import { headfulProblems } from "./headful";
import { hostsProblems } from "./targets/hosts";
import { kubernetesProblems, kubernetesWarnings, plannedKubernetes } from "./targets/kubernetes";
import { formatProblem, problem } from "./problems";
import { liveReasons as liveReasonsOf } from "./live";
import { allowlistProblems, reachesPublicHosts, reaching } from "./reaching";
import { namingProblems, stackNameProblem } from "./reserved";
import { plannedRequestLog, recordProblems } from "./request-log";
import { siteTable } from "./site-table";
import { plannedReplay, replayedWebsiteMarks, replayProblems, servedLive } from "./replay";
import { websiteProblems, websiteWarnings } from "./sites";
import { selfTestPlan, selfTestWarnings } from "./self-test";
import { startTabReachProblems, startTabUrlProblems } from "./start-tabs";
import { GATEWAY_PORT, topologyNames } from "./topology";
import type {
  ConfigParts,
  Plan,
  PlannedComputer,
  PlannedWebsite,
  PlanResult,
  Problem,
  RecordingFile,
  StackConfig,
} from "./types";

export * from "./types";
export { formatProblem, configPath, CONFIG_NAMESPACE } from "./problems";
export { covers, isAddress, isLocalhostName, isHostName, isWildcard, isDomainPattern } from "../protocol/host-names";
export { liveHosts, isClaimed } from "./claims";
export { reaching, reachesPublicHosts } from "./reaching";
export { liveWebsiteReason, publicReachOf } from "./live";
export { siteTable } from "./site-table";
export {
  servedLive,
  replayedNames,
  recordingImage,
  recordingDockerfile,
  replayServerServiceConfig,
  REPLAY_SERVER_IMAGE,
} from "./replay";
export { RESERVED_NAMES, ROLE_SUFFIXES } from "./reserved";
export * from "./topology";
export {
  gatewayServiceConfig,
  gatewayConfigOnHosts,
  siteProxyServiceConfig,
  siteProxyConfigOnHosts,
  siteServerUrl,
  DOCKER_DEFAULT_ADDRESS_POOLS,
  engineMachines,
  type EngineMachine,
  browserServiceConfig,
} from "./services";
export type { GatewayServiceConfig, SiteProxyServiceConfig, BrowserServiceConfig } from "./services";

export interface PlanOptions {
  /** The Pulumi stack name: it prefixes every Docker name. */
  stack: string;
  /** False skips the self-test whatever the config says (`multienv up --no-self-test`). */
  selfTest?: boolean;
  /**
   * Each replayed site's recording as read (src/config/recordings.ts): a replayed site without one is refused, since
   * the plan cannot read files.
   */
  recordings?: Record<string, RecordingFile>;
}

/**
 * Every problem with `config` as a stack named `stack`, in config order (names first, then sites, computers, capture).
 */
export function planProblems(config: StackConfig, stack: string): Problem[] {
  return planProblemsOfParts(config, stack, { websites: true, computers: true });
}

/**
 * The plan's problems with a config of which only some parts passed the schema (`config` holds those parts, the
 * rest at their defaults), so one run reports both kinds. Every rule runs whose parts all passed: a rule of one
 * field (a start tab's URL, an allowlist's names, an entry's name) on that field wherever its entry failed, a rule
 * between parts only when each is whole: a start tab is not "claimed by no website" because the website that
 * claims it failed the schema.
 */
export function planProblemsOfParts(config: StackConfig, stack: string, parts: ConfigParts): Problem[] {
  const problems: Problem[] = [];
  const failedComputers = parts.failedComputers ?? {};
  const stackProblem = stackNameProblem(stack);
  if (stackProblem !== undefined) problems.push(problem("", stackProblem));
  problems.push(
    ...namingProblems(
      {
        websites: { ...Object.fromEntries((parts.failedWebsites ?? []).map((n) => [n, true])), ...config.websites },
        computers: { ...failedComputers, ...config.computers },
      },
      stack,
    ),
  );
  for (const site of Object.keys(config.websites).sort()) {
    problems.push(...websiteProblems(site, config.websites[site]));
    problems.push(...replayProblems(site, config.websites[site]));
  }
  problems.push(...claimProblems(config.websites));
  const live = parts.websites ? liveHosts(config.websites).hosts : [];
  for (const computer of [...Object.keys(config.computers), ...Object.keys(failedComputers)].sort()) {
    const whole = Object.hasOwn(config.computers, computer) ? config.computers[computer] : undefined;
    const fields = whole ?? failedComputers[computer];
    if (fields.network !== undefined) problems.push(...allowlistProblems(computer, fields.network));
    if (fields.startTabs !== undefined) problems.push(...startTabUrlProblems(computer, fields.startTabs));
    if (whole !== undefined) problems.push(...headfulProblems(computer, whole));
    if (whole !== undefined && parts.websites)
      problems.push(...startTabReachProblems(computer, whole, reaching(whole.network, live), config.websites));
  }
  if (parts.websites) problems.push(...captureProblems(config));
  problems.push(...recordProblems(config));
  problems.push(...ec2Problems(config));
  if (parts.computers) problems.push(...hostsProblems(config));
  problems.push(...kubernetesProblems(config, stack));
  return problems;
}

function plannedWebsites(
  config: StackConfig,
  stack: string,
  recordings: Record<string, RecordingFile>,
): PlannedWebsite[] {
  return Object.keys(config.websites)
    .sort()
    .map((name) => {
      const website = config.websites[name];
      const planned: PlannedWebsite = {
        name,
        live: website.live,
        domains: [...website.domains],
        allowHosts: [...website.allowHosts],
        server: {
          containerName: topologyNames.siteContainer(stack, name, "server"),
          image: website.server.image,
          port: website.server.port,
          alias: topologyNames.siteAlias(name, "server"),
        },
        settings: website.settings,
        secretSettings: { ...website.secretSettings },
        ...(website.accountPool === undefined ? {} : { accountPool: website.accountPool }),
        // A live site's server calls the real site's API, so it also sits on the egress network; a replayed one's
        // needs no network: the site is the recording.
        serverOnEgress: servedLive(website),
        // Only a site served live is recorded: a replayed one is the recording already.
        ...(servedLive(website) && website.record
          ? {
              record: {
                keepCredentials: website.keepCredentials === true,
                ...(website.recordTrust === undefined ? {} : { trust: website.recordTrust }),
              },
            }
          : {}),
      };
      if (website.live && website.replay !== undefined)
        planned.replay = plannedReplay(stack, name, website, recordings[name]);
      // Every synthetic site serves its pages from a frontend; `frontend` in the config only overrides its image and
      // port.
      if (!website.live) {
        planned.frontend = {
          containerName: topologyNames.siteContainer(stack, name, "frontend"),
          image: website.frontend?.image,
          port: website.frontend?.port ?? 80,
          alias: topologyNames.siteAlias(name, "frontend"),
        };
      }
      return planned;
    });
}

/**
 * Decides the env for `config` as stack `options.stack`: the containers, networks and volumes with their
 * Docker names, each computer's reaching and site table, the capture sidecars and the live marks.
 * Returns every problem at once when the stack breaks a rule; warnings either way.
 */
export function plan(config: StackConfig, options: PlanOptions): PlanResult {
  const { stack } = options;
  const live = liveHosts(config.websites);
  const warningProblems = [...live.warnings];
  if (config.ec2 !== undefined && config.target !== "ec2") {
    warningProblems.push(
      problem(["ec2"], `ignored, since target is ${config.target}; set target: ec2 to deploy on EC2, or remove ec2`),
    );
  }
  if (config.hosts !== undefined && config.target !== "hosts") {
    warningProblems.push(
      problem(
        ["hosts"],
        `ignored, since target is ${config.target}; set target: hosts to deploy on these hosts, or remove hosts`,
      ),
    );
  }
  warningProblems.push(...kubernetesWarnings(config));
  for (const site of Object.keys(config.websites).sort())
    warningProblems.push(...websiteWarnings(site, config.websites[site]));
  warningProblems.push(...captureWarnings(config));
  warningProblems.push(...ec2Warnings(config));
  warningProblems.push(...selfTestWarnings(config));
  const warnings = warningProblems.map(formatProblem);
  const problems = planProblems(config, stack);
  const recordings = options.recordings ?? {};
  for (const site of Object.keys(config.websites).sort()) {
    const website = config.websites[site];
    if (website.live && website.replay !== undefined && !Object.hasOwn(recordings, site))
      problems.push(
        problem(
          ["websites", site, "replay"],
          `the recording ${website.replay.file} was not read, so the site cannot be served from it; deploy with multienv up or pulumi up, which read it`,
        ),
      );
  }
  if (problems.length > 0) return { ok: false, problems, warnings };

  const websites = plannedWebsites(config, stack, recordings);
  const computers: PlannedComputer[] = Object.keys(config.computers)
    .sort()
    .map((name) => {
      const computer = config.computers[name];
      const reach = reaching(computer.network, live.hosts);
      return {
        name,
        image: computer.image,
        network: Array.isArray(computer.network) ? [...computer.network] : computer.network,
        routesSites: computer.routesSites,
        startTabs: [...computer.startTabs],
        headful: computer.headful,
        reaching: reach,
        siteTable: siteTable(computer, config.websites),
        reachesPublicHosts: reachesPublicHosts(reach),
        browserContainerName: topologyNames.browser(stack, name),
        proxyContainerName: topologyNames.siteProxy(stack, name),
        networkName: topologyNames.computerNetwork(stack, name),
        linkNetworkName: topologyNames.linkNetwork(stack, name),
        egressNetworkName: topologyNames.computerEgressNetwork(stack, name),
        caVolumeName: topologyNames.caVolume(stack, name),
      };
    });
  const liveWebsites = websites
    .filter((w) => w.live && w.replay === undefined)
    .map((w) => ({
      name: w.name,
      domains: [...w.domains],
      allowHosts: [...w.allowHosts],
      reproducible: false as const,
      ...(w.record ? { recorded: true as const } : {}),
    }));
  // Live, so not reproducible: a live site served live, and each computer that reaches the public web on its own.
  const liveReasons = liveReasonsOf(liveWebsites, config.computers, config.websites);

  const requestLog = plannedRequestLog(config.requestLog);
  const result: Plan = {
    stack,
    target: config.target,
    websites,
    computers,
    liveHosts: live.hosts,
    capture: {
      enabled: config.captureTraffic,
      fileSizeMb: config.capture.fileSizeMb,
      fileCount: config.capture.fileCount,
      volumeName: topologyNames.capturesVolume(stack),
      sidecars: config.captureTraffic ? captureSidecars(stack, websites) : [],
    },
    ...(requestLog ? { requestLog } : {}),
    gateway: { containerName: topologyNames.gateway(stack), port: GATEWAY_PORT },
    networks: {
      env: topologyNames.envNetwork(stack),
      egress: topologyNames.egressNetwork(stack),
      ingress: topologyNames.ingressNetwork(stack),
    },
    live: liveReasons.length > 0,
    reproducible: liveReasons.length === 0,
    liveReasons,
    liveWebsites,
    replayedWebsites: replayedWebsiteMarks(websites),
    selfTest: selfTestPlan(computers, websites, {
      enabled: config.selfTest !== false && options.selfTest !== false && computers.length > 0,
      publicUrl: typeof config.selfTest === "object" ? config.selfTest.publicUrl : undefined,
    }),
    warnings,
  };
  if (config.target === "ec2" && config.ec2 !== undefined) result.ec2 = plannedEc2(config.ec2);
  if (config.target === "hosts" && config.hosts !== undefined) result.hosts = structuredClone(config.hosts);
  if (config.target === "kubernetes") result.kubernetes = plannedKubernetes(stack, config.kubernetes);
  return { ok: true, plan: result, warnings };
}
