// The zod schema of the stack config (docs/design.md "Stack config", namespace `multienv`).
// Structure and types only; the rules between values (names, claims, reaching...) are src/plan's.
// Every object is strict: an unknown key is a typo, refused rather than silently ignored.
import { z } from "zod";
import ipaddr from "ipaddr.js";
// The region and instance type names @pulumi/aws ships (aws.Region, aws.ec2.InstanceType), read from its generated
// enum files: plain objects with no imports, where `import * as aws from "@pulumi/aws"` loads the whole SDK (seconds).
import { Region } from "@pulumi/aws/types/enums";
import { InstanceType } from "@pulumi/aws/types/enums/ec2";
import { EC2_DEFAULT_LIFETIME_HOURS, EC2_DEFAULT_SSH_USER } from "../plan/targets/ec2";
import { editDistance } from "../protocol/config-issues";
import { DEFAULT_REQUEST_LOG_BODY_BYTES } from "../protocol/request-log";

/** An OpenSSH public key line (`ssh-ed25519 AAAA... comment`): what EC2 key pairs take. */
export const OPENSSH_PUBLIC_KEY =
  /^(ssh-(rsa|ed25519|dss)|ecdsa-sha2-[a-z0-9]+|sk-[a-z0-9-]+@openssh\.com) [A-Za-z0-9+/=]+( .*)?$/;

const port = z.number().int().min(1).max(65535);

// Docker's image reference grammar (github.com/distribution/reference): [host[:port]/]path[:tag][@digest], each path
// component lower-case letters and digits joined by `.`, `_`, `__` or dashes. Docker refuses anything else, at the
// deploy; an upper-case name, a space or a stray character is refused here instead.
const PATH_COMPONENT = "[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
const DOMAIN_COMPONENT = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
const REGISTRY = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[0-9a-fA-F:.]+\\])(?::[0-9]+)?`;
const TAG = "[\\w][\\w.-]{0,127}";
const DIGEST = "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}";
export const IMAGE_REFERENCE = new RegExp(
  `^(?:${REGISTRY}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*(?::${TAG})?(?:@${DIGEST})?$`,
);
/** Docker's limit on the name part (registry and path) of a reference. */
const IMAGE_NAME_MAX = 255;

/** Why `ref` is not an image reference Docker takes, or undefined. */
export function imageReferenceProblem(ref: string): string | undefined {
  if (ref === "") return "is empty; give an image reference such as shop-server:latest";
  const name = ref.replace(/@.*$/, "").replace(/:[\w][\w.-]*$/, "");
  if (IMAGE_REFERENCE.test(ref) && name.length <= IMAGE_NAME_MAX) return undefined;
  if (name.length > IMAGE_NAME_MAX)
    return `names an image of more than ${IMAGE_NAME_MAX} characters, which Docker refuses`;
  const hint = /\s/.test(ref)
    ? "it holds a space"
    : name !== name.toLowerCase() && IMAGE_REFERENCE.test(ref.replace(name, lowerPath(name)))
      ? `an image name is lower case: ${ref.replace(name, lowerPath(name))}`
      : "each part of the name is lower-case letters and digits joined by . _ or -, then an optional :tag or @sha256:digest";
  return `${JSON.stringify(ref)} is not a Docker image reference (${hint}); write one such as shop-server:latest or registry.example.com/team/shop:1.2`;
}

/** The path of an image name in lower case, its registry host left as written. */
function lowerPath(name: string): string {
  const slash = name.indexOf("/");
  const first = slash < 0 ? "" : name.slice(0, slash);
  const isRegistry = slash >= 0 && (first.includes(".") || first.includes(":") || first === "localhost");
  return isRegistry ? `${first}/${name.slice(slash + 1).toLowerCase()}` : name.toLowerCase();
}

const image = z.string().superRefine((ref, ctx) => {
  const message = imageReferenceProblem(ref);
  if (message !== undefined) ctx.addIssue({ code: "custom", message, input: ref });
});
const names = z.array(z.string());

/** A stack config key in this namespace: what `pulumi config set --secret <key>` takes. */
export const CONFIG_KEY = /^[A-Za-z][A-Za-z0-9_-]*$/;

const serverSchema = z.strictObject({ image: image.optional(), port: port.default(8000) });
const frontendSchema = z.strictObject({ image: image.optional(), port: port.default(80) });

const replayNames = z.array(z.string().min(1, "an empty name"));

/** `replay` on a live site: the HAR file alone, or it with the volatile query parameters and body fields to ignore. */
export const replaySchema = z
  .union(
    [
      z.string().min(1, "the path of a HAR file"),
      z.strictObject({
        file: z.string().min(1, "the path of a HAR file"),
        ignoreParams: replayNames.default([]),
        ignoreBodyFields: replayNames.default([]),
      }),
    ],
    {
      error: () =>
        "must be the path of a HAR file, or {file, ignoreParams, ignoreBodyFields}, e.g. replay: recordings/shop.har",
    },
  )
  .transform((value) => (typeof value === "string" ? { file: value, ignoreParams: [], ignoreBodyFields: [] } : value));

export const websiteSchema = z.strictObject({
  domains: names,
  live: z.boolean().default(false),
  allowHosts: names.default([]),
  server: serverSchema.default({ port: 8000 }),
  frontend: frontendSchema.optional(),
  /** Live sites only: serve the site from this recording instead of the real site. */
  replay: replaySchema.optional(),
  settings: z.record(z.string(), z.json()).default({}),
  secretSettings: z
    .record(
      z.string(),
      z.string().regex(CONFIG_KEY, {
        error: "must name a stack config key (letters, digits, _ and -, starting with a letter), e.g. githubToken",
      }),
    )
    .default({}),
  /** Live sites only: open its HTTPS at each computer's site proxy, so its exchanges go in the request log. */
  record: z.boolean().optional(),
  /**
   * With `record`: keep its credentials in the request log: its cookies' values (Cookie and Set-Cookie, named or not),
   * Authorization of any scheme and every other credential header (by default all are left out, as `[redacted]`).
   */
  keepCredentials: z.boolean().optional(),
  /**
   * With `record`: PEM certificates (one or more CAs) the site's TLS is also verified against, for its names alone,
   * besides the system's roots: a staging site or a network that inspects TLS with a CA of its own.
   */
  recordTrust: z
    .string()
    .regex(/-----BEGIN CERTIFICATE-----[\s\S]+-----END CERTIFICATE-----/, {
      error: "must be PEM certificates (-----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----)",
    })
    .optional(),
  /** A live site only: the account pool (a stack of its own) whose accounts its tasks lease, instead of settings. */
  accountPool: z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/, { error: "must name a pool's stack, such as github-accounts" })
    .optional(),
});

export const computerSchema = z.strictObject({
  image: image.optional(),
  network: z.union([z.literal("allow-all"), z.literal("none"), names], {
    error: (issue) =>
      `${issue.input === undefined ? "is required: it" : ""} must be "allow-all", "none" or a list of host names (an allowlist)`.trimStart(),
  }),
  routesSites: z.boolean().default(true),
  startTabs: z.array(z.string()).default([]),
  /**
   * Runs Chromium on a real X display (Debian's Xvfb, started by the project's browser launcher) instead of headless:
   * its user agent and rendering are a desktop browser's. Default false (headless).
   */
  headful: z.boolean().default(false),
});

/** Why `cidr` is not an IPv4 or IPv6 network in CIDR notation (host bits clear), or undefined. */
export function cidrProblem(cidr: string): string | undefined {
  let parsed: [ipaddr.IPv4 | ipaddr.IPv6, number];
  try {
    parsed = ipaddr.parseCIDR(cidr);
  } catch {
    const prefix = /\/(\d+)$/.exec(cidr)?.[1];
    const max = cidr.includes(":") ? 128 : 32;
    if (prefix !== undefined && Number(prefix) > max && ipaddr.isValid(cidr.replace(/\/\d+$/, "")))
      return `${JSON.stringify(cidr)} has a prefix of ${prefix} bits, and an ${max === 32 ? "IPv4" : "IPv6"} address has ${max}; write at most /${max} (/${max} is one address)`;
    return `${JSON.stringify(cidr)} is not a CIDR; write an address and a prefix length such as 203.0.113.7/32`;
  }
  const [address, bits] = parsed;
  // ipaddr.js also takes the old forms of IPv4 (10.1, 0xa.0.0.1), which the cloud APIs do not.
  if (address.kind() === "ipv4" && !ipaddr.IPv4.isValidFourPartDecimal(cidr.replace(/\/\d+$/, "")))
    return `${JSON.stringify(cidr)} is not a CIDR; write an address of four numbers and a prefix length such as 203.0.113.7/32`;
  const network =
    address.kind() === "ipv4" ? ipaddr.IPv4.networkAddressFromCIDR(cidr) : ipaddr.IPv6.networkAddressFromCIDR(cidr);
  if (network.toString() !== address.toString())
    // A range with host bits set is taken as its network by some APIs and refused by others; either way it is likely
    // not what was meant (the one address, /32, or the network it lies in).
    return `${JSON.stringify(cidr)} has host bits set; write the network ${network.toString()}/${bits}, or ${address.toString()}/${address.kind() === "ipv4" ? 32 : 128} for the one address`;
  return undefined;
}

const cidr = z.string().superRefine((value, ctx) => {
  const message = cidrProblem(value);
  if (message !== undefined) ctx.addIssue({ code: "custom", message, input: value });
});

const AWS_REGIONS: readonly string[] = Object.values(Region);
const EC2_INSTANCE_TYPES: readonly string[] = Object.values(InstanceType);

/** ` (close: a, b)`: up to three known names a typo away from `name`, or "" when none is. */
function closest(name: string, known: readonly string[]): string {
  const near = known
    .map((k) => ({ k, d: editDistance(name.toLowerCase(), k) }))
    .filter(({ d }) => d <= Math.max(2, Math.floor(name.length / 4)))
    .sort((a, b) => a.d - b.d || a.k.localeCompare(b.k))
    .slice(0, 3)
    .map(({ k }) => k);
  return near.length === 0 ? "" : ` (close: ${near.join(", ")})`;
}

export const ec2Schema = z.strictObject({
  region: z.string().refine((r) => AWS_REGIONS.includes(r), {
    error: (issue) =>
      `${JSON.stringify(issue.input)} is not an AWS region; write one such as us-east-1${closest(String(issue.input), AWS_REGIONS)}`,
  }),
  instanceType: z.string().refine((t) => EC2_INSTANCE_TYPES.includes(t), {
    error: (issue) =>
      `${JSON.stringify(issue.input)} is not an EC2 instance type; write one such as t3.large${closest(String(issue.input), EC2_INSTANCE_TYPES)}`,
  }),
  runnerCidrs: z.array(cidr).min(1, { error: "needs at least one CIDR: the addresses the runner connects from" }),
  sshPublicKey: z.string().regex(OPENSSH_PUBLIC_KEY, {
    error: "must be an OpenSSH public key line such as `ssh-ed25519 AAAA... you@host`",
  }),
  vpcId: z
    .string()
    .regex(/^vpc-[0-9a-f]+$/, { error: "must be a VPC id such as vpc-0abc1234" })
    .optional(),
  subnetId: z
    .string()
    .regex(/^subnet-[0-9a-f]+$/, { error: "must be a subnet id such as subnet-0abc1234" })
    .optional(),
  ami: z
    .string()
    .regex(/^ami-[0-9a-f]+$/, { error: "must be an AMI id such as ami-0abc1234" })
    .optional(),
  sshUser: z
    .string()
    .regex(/^[a-z_][a-z0-9_-]{0,31}$/, { error: "must be a login name such as ec2-user or ubuntu (the AMI's user)" })
    .default(EC2_DEFAULT_SSH_USER),
  lifetimeHours: z
    .number()
    .positive({
      error: `must be more than 0: the hours after which the instances stop themselves (default ${EC2_DEFAULT_LIFETIME_HOURS})`,
    })
    .max(24 * 30, { error: "must be at most 720 (30 days)" })
    .default(EC2_DEFAULT_LIFETIME_HOURS),
});

/** A host name or an IPv4/IPv6 address: what an ssh config's HostName takes (no spaces, quotes or `$`). */
const HOST_ADDRESS =
  /^([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*|\d{1,3}(\.\d{1,3}){3}|[0-9a-fA-F:]+)$/;
const address = z.string().regex(HOST_ADDRESS, { error: "must be a host name or an IP address such as 192.0.2.10" });

/** One existing Docker host, reached over SSH. */
export const hostSchema = z.strictObject({
  address,
  user: z.string().regex(/^[a-z_][a-z0-9_-]{0,31}$/, { error: "must be a login name such as ubuntu" }),
  hostKey: z.string().regex(/^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)) [A-Za-z0-9+/]+={0,2}( .*)?$/, {
    error:
      "must be the host's public key line, such as the output of `ssh-keyscan -t ed25519 <host>` without the host name (ssh-ed25519 AAAA...)",
  }),
  port: port.optional(),
  identityFile: z
    .string()
    .regex(/^[A-Za-z0-9._/~+-]+$/, { error: "must be a path to a private key file (letters, digits and . _ / ~ + -)" })
    .optional(),
  privateAddress: address.optional(),
});

/** The hosts target: the env's host and one per computer. */
export const hostsSchema = z.strictObject({
  env: hostSchema,
  computers: z.record(z.string(), hostSchema).default({}),
});

export const captureSchema = z.strictObject({
  fileSizeMb: z.number().int().min(1).max(10_000).default(20),
  fileCount: z.number().int().min(1).max(1_000).default(10),
});

/** The most of one body the request log may keep: more would make one exchange's entry a burden to hold. */
export const MAX_REQUEST_LOG_BODY_BYTES = 64 * 1024 * 1024;

/**
 * The request log (every exchange each computer's site proxy decrypts, as HAR): on (the default), off, or on with
 * the most of each body it keeps and the headers and cookies whose values it never keeps.
 */
export const requestLogSchema = z.union(
  [
    z.boolean(),
    z.strictObject({
      bodyLimitBytes: z.number().int().min(0).max(MAX_REQUEST_LOG_BODY_BYTES).default(DEFAULT_REQUEST_LOG_BODY_BYTES),
      redact: z
        .array(z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, { error: "must be a header or cookie name" }))
        .default([]),
    }),
  ],
  {
    error: (issue) =>
      issue.code === "invalid_union" &&
      (typeof issue.input !== "object" || issue.input === null || Array.isArray(issue.input))
        ? "must be true, false or {bodyLimitBytes: <bytes of each body kept>, redact: [<header or cookie names>]}"
        : undefined,
  },
);

/** A Kubernetes label key or value (the API server's rules), for nodeSelector and tolerations. */
const LABEL_KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;
const labelKey = z
  .string()
  .regex(LABEL_KEY, { error: "must be a Kubernetes label key such as node-pool or example.com/pool" });
const labelValue = z.string().regex(LABEL_VALUE, {
  error:
    "must be a Kubernetes label value: at most 63 letters, digits, - _ and ., starting and ending with a letter or digit",
});

/** One toleration of the env's pods, as a pod spec writes it. */
export const tolerationSchema = z.strictObject({
  key: labelKey.optional(),
  operator: z.enum(["Equal", "Exists"]).default("Equal"),
  value: labelValue.optional(),
  effect: z.enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]).optional(),
  tolerationSeconds: z.number().int().min(0).optional(),
});

/** Where one group of the env's pods goes, beside the target-wide nodeSelector and tolerations. */
export const kubernetesPlacementSchema = z.strictObject({
  nodeSelector: z.record(labelKey, labelValue).default({}),
  tolerations: z.array(tolerationSchema).default([]),
});

/** The env's pods by group, each placed on its own nodes: computers (browsers, site proxies), sites, gateway. */
export const kubernetesPlacementsSchema = z.strictObject({
  computers: kubernetesPlacementSchema.optional(),
  sites: kubernetesPlacementSchema.optional(),
  gateway: kubernetesPlacementSchema.optional(),
});

/** The kubernetes target: the cluster the kubeconfig names, and how the env's pods are placed there. */
export const kubernetesSchema = z.strictObject({
  kubeconfig: z.string().min(1, { error: "must be the path of a kubeconfig file, such as ~/.kube/config" }).optional(),
  context: z
    .string()
    .min(1, { error: "must name a context of the kubeconfig (kubectl config get-contexts lists them)" })
    .optional(),
  imageRegistry: z
    .string()
    .regex(/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:\d{1,5})?(\/[a-z0-9]([a-z0-9._/-]*[a-z0-9])?)?$/, {
      error: "must be a registry host with an optional path, such as registry.example.com:5000/multienv",
    })
    .optional(),
  imagePullPolicy: z
    .enum(["Always", "IfNotPresent", "Never"], {
      error: "must be Always, IfNotPresent or Never",
    })
    .optional(),
  runtimeClassName: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, {
      error: "must name a RuntimeClass of the cluster, such as gvisor",
    })
    .optional(),
  nodeSelector: z.record(labelKey, labelValue).default({}),
  tolerations: z.array(tolerationSchema).default([]),
  placement: kubernetesPlacementsSchema.default({}),
});

/** The deploy's self-test: on (default), off, or on with the page an allow-all computer must reach. */
export const selfTestSchema = z.union(
  [
    z.boolean(),
    z.strictObject({
      publicUrl: z
        .string()
        .refine((u) => URL.canParse(u) && /^https?:$/.test(new URL(u).protocol), {
          error: "must be an http:// or https:// URL, such as https://example.com/",
        })
        // Like a start tab's, a user name or password here would sit in plain text in the outputs; never echoed.
        .refine((u) => !URL.canParse(u) || (new URL(u).username === "" && new URL(u).password === ""), {
          error:
            "holds a user name or password in its URL (user:password@), which would sit in plain text in the outputs; remove them (the URL is not shown here): the public page needs no sign-in",
        })
        .optional(),
    }),
  ],
  {
    error: (issue) =>
      issue.code === "invalid_union" &&
      (typeof issue.input !== "object" || issue.input === null || Array.isArray(issue.input))
        ? "must be true, false or {publicUrl: <the page an allow-all computer must reach>}"
        : undefined,
  },
);

// `ec2` is required when target is ec2: validate.ts checks that, so it is reported beside every other problem.
export const stackConfigSchema = z.strictObject({
  target: z.enum(["docker", "ec2", "hosts", "kubernetes"]).default("docker"),
  websites: z.record(z.string(), websiteSchema).default({}),
  computers: z.record(z.string(), computerSchema).default({}),
  captureTraffic: z.boolean().default(false),
  capture: captureSchema.default({ fileSizeMb: 20, fileCount: 10 }),
  requestLog: requestLogSchema.default(true),
  ec2: ec2Schema.optional(),
  hosts: hostsSchema.optional(),
  kubernetes: kubernetesSchema.optional(),
  selfTest: selfTestSchema.default(true),
});

/** The keys the `multienv` namespace holds besides the secrets that secretSettings name. */
export const STACK_KEYS = [
  "target",
  "websites",
  "computers",
  "captureTraffic",
  "capture",
  "requestLog",
  "ec2",
  "hosts",
  "kubernetes",
  "selfTest",
] as const;
