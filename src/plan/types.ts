// The data contract between config loading, planning and the components.
// `StackConfig` is what `loadStackConfig` produces once the zod schema accepts a stack;
// `Plan` is what `plan()` decides from it. Both are plain data: no Pulumi, no I/O.
// Components consume a Plan and decide nothing of their own.

export type Target = "docker" | "ec2" | "hosts" | "kubernetes";

/** A computer's network as configured: every host, none, or an allowlist of host names. */
export type ComputerNetwork = "allow-all" | "none" | string[];

/** What a computer's site proxy forwards beyond synthetic names (docs/design.md "Reaching"). */
export type Reaching = "allow-all" | "none" | string[];

export interface ImageRef {
  /** An image reference to run instead of the project's own image. */
  image?: string;
  /** The port the container listens on. */
  port: number;
}

export interface WebsiteConfig {
  /** Exact DNS names or `*.suffix` wildcards. */
  domains: string[];
  live: boolean;
  /** Live sites only: further hosts the live site's pages need (CDNs and the like). */
  allowHosts: string[];
  server: ImageRef;
  /** Synthetic sites only. */
  frontend?: ImageRef;
  /** Live sites only: the site is served from this recording instead of the real site. */
  replay?: ReplayConfig;
  /** Handed to the server as one JSON line in AGENTENV_WEBSITE_SETTINGS. */
  settings: Record<string, unknown>;
  /** Setting name -> the name of a stack config key (namespace `multienv`) holding a secret. */
  secretSettings: Record<string, string>;
  /** Live sites only: its HTTPS is opened at each computer's site proxy and its exchanges recorded. */
  record?: boolean;
  /**
   * With `record`: its credentials stay in the request log (cookies' values, Authorization and the other credential
   * headers), which are left out by default.
   */
  keepCredentials?: boolean;
  /** With `record`: PEM certificates its TLS is also verified against, besides the system's roots. */
  recordTrust?: string;
  /** A live site: the account pool whose accounts its tasks lease (the leased account's settings go on top). */
  accountPool?: string;
}

/** `websites.<name>.replay`: a HAR recording of the live site, and what of a request is volatile. */
export interface ReplayConfig {
  /** The HAR file: relative to the project directory, or absolute. */
  file: string;
  /** Query parameters left out of every comparison. */
  ignoreParams: string[];
  /** Body fields (form fields, JSON members or dotted paths) left out of every comparison. */
  ignoreBodyFields: string[];
}

/** A recording as read at deploy time (src/config/recordings.ts): where it is and what it holds. */
export interface RecordingFile {
  /** Absolute path. */
  path: string;
  /** SHA-256 of its bytes, hex. */
  sha256: string;
  /** Its size: what the replay server holds in memory grows with it. */
  bytes: number;
}

export interface ComputerConfig {
  image?: string;
  network: ComputerNetwork;
  routesSites: boolean;
  startTabs: string[];
  /** Chromium on a display of Xvfb rather than headless. */
  headful: boolean;
}

export interface Ec2Config {
  region: string;
  instanceType: string;
  /** CIDRs the runner connects from: the only sources allowed to the gateway port and SSH. */
  runnerCidrs: string[];
  sshPublicKey: string;
  vpcId?: string;
  subnetId?: string;
  ami?: string;
  /** The AMI's login user; default `ec2-user`. */
  sshUser?: string;
  /** Hours after boot at which a VM shuts itself down and is terminated; default 4. */
  lifetimeHours?: number;
}

/** The ec2 section as planned: defaults filled in, the instance type's architecture and its AMI parameter. */
export interface PlannedEc2 extends Ec2Config {
  sshUser: string;
  lifetimeHours: number;
  architecture: "arm64" | "x86_64";
  /** The SSM parameter the AMI is read from; unset when `ami` is given. */
  amiParameter?: string;
}

/** An existing Docker host reached over SSH (target hosts). */
export interface HostConfig {
  address: string;
  user: string;
  /** Its public key line: the only key accepted for it. */
  hostKey: string;
  port?: number;
  identityFile?: string;
  /** Where the env's other hosts reach it; default `address`. */
  privateAddress?: string;
}

export interface HostsConfig {
  env: HostConfig;
  computers: Record<string, HostConfig>;
}

export interface Toleration {
  key?: string;
  operator: "Equal" | "Exists";
  value?: string;
  effect?: "NoSchedule" | "PreferNoSchedule" | "NoExecute";
  tolerationSeconds?: number;
}

/** The kubernetes target's section. */
export interface KubernetesConfig {
  /** The kubeconfig file; unset: KUBECONFIG, else ~/.kube/config (as kubectl). */
  kubeconfig?: string;
  /** Its context; unset: the kubeconfig's current context. */
  context?: string;
  /** Where the project's images are pulled from (`<registry>/multienv/<role>:latest`); unset: the bare names. */
  imageRegistry?: string;
  imagePullPolicy?: "Always" | "IfNotPresent" | "Never";
  /** The RuntimeClass of the computers' pods (their browsers and proxies), e.g. a gVisor class. */
  runtimeClassName?: string;
  nodeSelector: Record<string, string>;
  tolerations: Toleration[];
  /** Where each group of pods goes, beside the nodeSelector and tolerations above (which every pod takes). */
  placement: Partial<Record<KubernetesPlacementGroup, KubernetesPlacement>>;
}

/** The groups of an env's pods that a kubernetes config places apart: browsers and site proxies, sites, gateway. */
export type KubernetesPlacementGroup = "computers" | "sites" | "gateway";

/** Where a group of pods goes: the nodes whose labels match, and the taints it tolerates. */
export interface KubernetesPlacement {
  nodeSelector: Record<string, string>;
  tolerations: Toleration[];
}

/** The planned kubernetes section: the cluster, the namespace, and the pods' placement. */
export interface PlannedKubernetes {
  namespace: string;
  kubeconfig?: string;
  context?: string;
  imageRegistry?: string;
  imagePullPolicy: "Always" | "IfNotPresent" | "Never";
  runtimeClassName?: string;
  /**
   * Each group's placement: the target-wide nodeSelector with the group's over it (a key set in both takes the
   * group's value), the target-wide tolerations followed by the group's.
   */
  placement: Record<KubernetesPlacementGroup, KubernetesPlacement>;
}

export interface CaptureConfig {
  fileSizeMb: number;
  fileCount: number;
}

export interface RequestLogConfig {
  /** The most of each body (request and answer) an entry keeps. */
  bodyLimitBytes: number;
  /** Headers and cookies whose values the log never keeps. */
  redact: string[];
}

export interface StackConfig {
  target: Target;
  websites: Record<string, WebsiteConfig>;
  computers: Record<string, ComputerConfig>;
  captureTraffic: boolean;
  capture: CaptureConfig;
  /** The request log: on (the default, also when absent), off, or on with its body limit and redacted names. */
  requestLog?: boolean | RequestLogConfig;
  ec2?: Ec2Config;
  hosts?: HostsConfig;
  kubernetes?: KubernetesConfig;
  /** The deploy's self-test: on, off, or on with the page an allow-all computer must reach. */
  selfTest: boolean | { publicUrl?: string };
}

/**
 * Which parts of a config passed the schema, when not all of it did (src/config/validate.ts): the plan's rules run on
 * what passed, each only where every part it reads is whole.
 */
export interface ConfigParts {
  /** False when some website failed the schema: no rule reading every website (a start tab's claim) is judged. */
  websites: boolean;
  /** False when some computer failed the schema: no rule reading every computer (the hosts target's) is judged. */
  computers: boolean;
  /** The names of the websites that failed the schema, whose names are judged all the same. */
  failedWebsites?: string[];
  /** Each computer that failed the schema: those of its fields that passed on their own, judged alone. */
  failedComputers?: Record<string, Partial<Pick<ComputerConfig, "network" | "startTabs">>>;
}

/** One problem with a stack, named by its config path, e.g. `websites.github.domains[1]`. */
export interface Problem {
  /** Config path below the `multienv` namespace. */
  path: string;
  /** What is wrong and how to fix it. */
  message: string;
}

export interface PlannedContainer {
  /** Docker container name, unique on the engine: `<stack>-<site>-server` and the like. */
  containerName: string;
  /** The image to run; undefined means the project's own image for this role. */
  image?: string;
  port: number;
  /** Network alias on the env network (`<site>-server` / `<site>-frontend`); site containers only. */
  alias?: string;
}

export interface PlannedWebsite {
  name: string;
  live: boolean;
  domains: string[];
  allowHosts: string[];
  server: PlannedContainer;
  /** Present for synthetic sites only. */
  frontend?: PlannedContainer;
  settings: Record<string, unknown>;
  secretSettings: Record<string, string>;
  /** The account pool its server's account is leased from, when it has one. */
  accountPool?: string;
  /** A live site whose exchanges the site proxies record (its HTTPS opened there). */
  record?: { keepCredentials: boolean; trust?: string };
  /** Live site servers are also attached to the egress network (they call the real site's API); a replayed one not. */
  serverOnEgress: boolean;
  /** A replayed live site: its replay server, the gateway's frontend for the site's names. */
  replay?: PlannedReplay;
}

/** A replayed live site's replay server (role `replay`): on the env network alone, like a synthetic site's frontend. */
export interface PlannedReplay extends PlannedContainer {
  alias: string;
  /** Its control listener (counters, reset), for the gateway alone. */
  controlPort: number;
  /** The recording as configured (for the outputs) and as read. */
  file: string;
  recording: RecordingFile;
  /** The image that carries the recording: `multienv/replay-recording:<sha256>`, built FROM multienv/replay-server. */
  recordingImage: string;
  ignoreParams: string[];
  ignoreBodyFields: string[];
  /** The largest request body (and WebSocket message) it holds to compare; a larger one is refused. */
  maxBodyBytes: number;
  /** Its container's memory limit (replayServerMemoryMiB): past it the server restarts, its episode kept. */
  memoryMiB: number;
}

export interface PlannedCapture {
  /** The website container whose network namespace this sidecar shares. */
  target: string;
  site: string;
  /** `server` or `frontend`. */
  role: "server" | "frontend";
  containerName: string;
  /** File name prefix inside the captures volume: `<site>-<role>.pcap` (tcpdump appends the rotation index). */
  filePrefix: string;
}

export interface PlannedComputer {
  name: string;
  image?: string;
  network: ComputerNetwork;
  routesSites: boolean;
  startTabs: string[];
  /** Chromium on a display of Xvfb rather than headless (the project's browser image alone). */
  headful: boolean;
  reaching: Reaching;
  /** Synthetic site name -> the names it claims; empty when the computer does not route sites. */
  siteTable: Record<string, string[]>;
  /** True when the computer may reach hosts on the public web (allow-all, or any allowlisted/live host). */
  reachesPublicHosts: boolean;
  browserContainerName: string;
  proxyContainerName: string;
  /** The computer's own internal network: only the browser and its proxy are on it. */
  networkName: string;
  /** Internal: the gateway and this computer's proxy alone (docker target). */
  linkNetworkName: string;
  /** Reaches the web, for this computer's proxy alone: docker, when it reaches public hosts; ec2, always. */
  egressNetworkName: string;
  /** Volume holding the site proxy's CA certificate: `<stack>-<computer>-ca` (proxy rw, browser ro). */
  caVolumeName: string;
}

export interface LiveWebsiteMark {
  name: string;
  domains: string[];
  allowHosts: string[];
  reproducible: false;
  /** Its HTTPS is opened at the computers' site proxies and its exchanges recorded in the request log. */
  recorded?: true;
}

/**
 * One reason an env is live, so not reproducible: what it shows depends on the public web at the time. A live site
 * served live, or a computer that reaches the public web on its own (allow-all, or an allowlist naming public hosts).
 */
export type LiveReason =
  | {
      website: string;
      domains: string[];
      /** The reason in a line: `live website github (github.com, *.github.com) is served live`. */
      why: string;
    }
  | {
      computer: string;
      /** What of the public web it reaches: all of it, or the public names on its allowlist. */
      reach: "allow-all" | string[];
      /** The reason in a line: `computer open reaches the public web (network: allow-all)`. */
      why: string;
    };

/** A live site served from a recording: not live, reproducible as long as the recording is the same. */
export interface ReplayedWebsiteMark {
  name: string;
  /** The recording as configured. */
  recording: string;
  sha256: string;
}

export interface Plan {
  stack: string;
  /** What the deploy checks from inside each computer once the env is up. */
  selfTest: SelfTestPlan;
  target: Target;
  websites: PlannedWebsite[];
  computers: PlannedComputer[];
  /** Every live site's domains and allowHosts, after "synthetic wins". */
  liveHosts: string[];
  capture: {
    enabled: boolean;
    fileSizeMb: number;
    fileCount: number;
    volumeName: string;
    sidecars: PlannedCapture[];
  };
  /** The request log each computer's site proxy keeps (absent: none), served by the gateway's requests/v1. */
  requestLog?: RequestLogConfig;
  gateway: {
    containerName: string;
    /** Port inside the container. */
    port: number;
  };
  networks: {
    /** Internal: the gateway and the site containers. No computer's container is on it. */
    env: string;
    /** Reaches the web: live site servers (they call the real site). No computer's container is on it. */
    egress: string;
    /** Non-internal, the gateway alone: Docker publishes no port of a container only on internal networks. */
    ingress: string;
  };
  /** True when the env is live: `liveReasons` names why. */
  live: boolean;
  /** False when the env is live: what it shows depends on the public web at the time. */
  reproducible: boolean;
  /** Each live site served live and each computer that reaches the public web; empty when the env is reproducible. */
  liveReasons: LiveReason[];
  liveWebsites: LiveWebsiteMark[];
  /** Live sites served from a recording instead: they are not in `liveWebsites`. */
  replayedWebsites: ReplayedWebsiteMark[];
  warnings: string[];
  ec2?: PlannedEc2;
  hosts?: HostsConfig;
  kubernetes?: PlannedKubernetes;
}

export type PlanResult =
  { ok: true; plan: Plan; warnings: string[] } | { ok: false; problems: Problem[]; warnings: string[] };

// The deploy's self-test (what src/plan/self-test.ts plans, src/providers/self-test.ts runs).
export type SelfTestExpectation =
  /** The page loads over HTTPS from the site, its certificate from the env CA trusted by the browser. */
  | "synthetic-loads"
  /** The host answers through a tunnel: any answer that is not the proxy's own. */
  | "live-connects"
  /** The proxy refuses: 403 with its `refused` marker, or a `refused` line in its log for the host. */
  | "refused"
  /** A host on the public web answers (allow-all). */
  | "public-reached";

export interface SelfTestCheck {
  /** What the check shows, for the results and for the error that fails a deploy, e.g. "synthetic shop.test loads". */
  name: string;
  url: string;
  expect: SelfTestExpectation;
}

export interface SelfTestPlan {
  enabled: boolean;
  /** Computer -> its checks, in order. */
  checks: Record<string, SelfTestCheck[]>;
  /**
   * Computer -> its start tabs, checked against the names the sites' own cards declare: for the computers that route
   * sites, whose start tabs `check` holds to a website's names. Another computer's tabs are pages of the web (or of
   * its allowlist), which no site's card declares.
   */
  startTabs: Record<string, string[]>;
}
