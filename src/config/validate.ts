// The one validator behind both entry points (Pulumi program and `multienv check`): it sees each key
// of the `multienv` namespace as Pulumi stores it (a string, JSON for structured values) and whether
// it is a secret, and never needs a secret's value.
import { planProblemsOfParts } from "../plan";
import { problem, quote } from "../plan/problems";
import type { ConfigParts, Problem, StackConfig } from "../plan/types";
import { editDistance, friendlyMessage, issuesToProblems, suggestion } from "./issues";
import { secretReferenceProblems, siteSecretReferences, type SecretReference } from "./secrets";
import { CONFIG_NAMESPACE } from "../plan/problems";
import type { z } from "zod";
import {
  captureSchema,
  computerSchema,
  ec2Schema,
  hostSchema,
  hostsSchema,
  kubernetesSchema,
  tolerationSchema,
  kubernetesPlacementSchema,
  kubernetesPlacementsSchema,
  stackConfigSchema,
  STACK_KEYS,
  websiteSchema,
} from "./schema";

/** One key of the namespace, as Pulumi holds it. */
export interface RawConfigValue {
  /** The value's string form (structured values are JSON); absent for a secret, which is never read here. */
  value?: string;
  secret: boolean;
}

export interface Validated {
  config?: StackConfig;
  /** The config keys (without namespace) that secretSettings name, each checked to hold a secret. */
  secretKeys: string[];
  problems: Problem[];
}

/** Pulumi's string form back to a value: JSON when it parses, else the string itself (`docker`). */
export function decodeConfigValue(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

function knownKeysAt(path: readonly PropertyKey[]): readonly string[] {
  const [top, , sub] = path;
  if (path.length === 0) return STACK_KEYS;
  if (top === "websites" && path.length === 2) return Object.keys(websiteSchema.shape);
  if (top === "websites" && (sub === "server" || sub === "frontend")) return ["image", "port"];
  if (top === "websites" && sub === "replay") return ["file", "ignoreParams", "ignoreBodyFields"];
  if (top === "computers" && path.length === 2) return Object.keys(computerSchema.shape);
  if (top === "capture") return Object.keys(captureSchema.shape);
  if (top === "ec2") return Object.keys(ec2Schema.shape);
  if (top === "hosts" && path.length === 1) return Object.keys(hostsSchema.shape);
  if (top === "hosts") return Object.keys(hostSchema.shape);
  if (top === "kubernetes" && path.length === 1) return Object.keys(kubernetesSchema.shape);
  if (top === "kubernetes" && path[1] === "tolerations") return Object.keys(tolerationSchema.shape);
  if (top === "kubernetes" && path[1] === "placement" && path.length === 2)
    return Object.keys(kubernetesPlacementsSchema.shape);
  if (top === "kubernetes" && path[1] === "placement" && path.length === 3)
    return Object.keys(kubernetesPlacementSchema.shape);
  if (top === "kubernetes" && path[1] === "placement" && path[3] === "tolerations")
    return Object.keys(tolerationSchema.shape);
  return [];
}

/** The secretSettings references in a (possibly invalid) websites value, read as far as it goes. */
function secretReferences(websites: unknown): SecretReference[] {
  if (typeof websites !== "object" || websites === null) return [];
  return Object.entries(websites)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .flatMap(([site, website]) => {
      const secretSettings = (website as { secretSettings?: unknown } | null)?.secretSettings;
      if (typeof secretSettings !== "object" || secretSettings === null) return [];
      return siteSecretReferences(site, secretSettings as Record<string, unknown>);
    });
}

/**
 * A record of entries (websites, computers), each parsed on its own: those that pass, and the names of those that
 * fail (or false when the record itself is not one).
 */
function parsedEntries<T>(
  value: unknown,
  schema: z.ZodType<T>,
): { entries: Record<string, T>; failed: string[] | false } {
  const entries: Record<string, T> = {};
  if (value === undefined) return { entries, failed: [] };
  if (typeof value !== "object" || value === null || Array.isArray(value)) return { entries, failed: false };
  const failed: string[] = [];
  for (const [name, entry] of Object.entries(value)) {
    const parsed = schema.safeParse(entry);
    if (parsed.success) entries[name] = parsed.data;
    else failed.push(name);
  }
  return { entries, failed };
}

/** The fields of a computer that failed the schema which pass on their own, for the rules of one field. */
function computerFields(entry: unknown): NonNullable<ConfigParts["failedComputers"]>[string] {
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) return {};
  const { network, startTabs } = entry as Record<string, unknown>;
  const shape = computerSchema.shape;
  const parsedNetwork = network === undefined ? undefined : shape.network.safeParse(network);
  const parsedTabs = startTabs === undefined ? undefined : shape.startTabs.safeParse(startTabs);
  return {
    ...(parsedNetwork?.success ? { network: parsedNetwork.data } : {}),
    ...(parsedTabs?.success ? { startTabs: parsedTabs.data } : {}),
  };
}

/**
 * The parts of a config that passed the schema: each key, and each website and computer, that passes on its own, the
 * rest at their defaults; and which parts are whole (see ConfigParts).
 */
function parsedParts(input: Record<string, unknown>): { config: StackConfig; parts: ConfigParts } {
  const shape = stackConfigSchema.shape;
  const keyOrDefault = <K extends keyof typeof shape>(key: K) => {
    const parsed = shape[key].safeParse(input[key]);
    return (parsed.success ? parsed.data : shape[key].parse(undefined)) as z.output<(typeof shape)[K]>;
  };
  const websites = parsedEntries(input.websites, websiteSchema);
  const computers = parsedEntries(input.computers, computerSchema);
  const failedComputers = Object.fromEntries(
    (computers.failed || []).map((name) => [name, computerFields((input.computers as Record<string, unknown>)[name])]),
  );
  const config: StackConfig = {
    target: keyOrDefault("target"),
    websites: websites.entries,
    computers: computers.entries,
    captureTraffic: keyOrDefault("captureTraffic"),
    capture: keyOrDefault("capture"),
    requestLog: keyOrDefault("requestLog"),
    ec2: keyOrDefault("ec2"),
    hosts: keyOrDefault("hosts"),
    kubernetes: keyOrDefault("kubernetes"),
    selfTest: keyOrDefault("selfTest"),
  };
  const parts: ConfigParts = {
    websites: websites.failed !== false && websites.failed.length === 0,
    computers: computers.failed !== false && computers.failed.length === 0,
    failedWebsites: websites.failed || [],
    failedComputers,
  };
  return { config, parts };
}

/**
 * Validates the namespace's keys (names without the `multienv:` prefix). `stack` only shapes the fix
 * commands in messages. Every problem is returned at once.
 */
export function validateStackConfig(values: Record<string, RawConfigValue>, stack: string): Validated {
  const problems: Problem[] = [];
  const input: Record<string, unknown> = {};
  for (const key of STACK_KEYS) {
    const raw = values[key];
    if (raw === undefined) continue;
    if (raw.secret) {
      problems.push(
        problem(
          [key],
          `holds a secret, so the plan cannot read it; keep ${key} plaintext and put each secret in its own key named by a website's secretSettings`,
        ),
      );
      continue;
    }
    if (raw.value !== undefined) input[key] = decodeConfigValue(raw.value);
  }

  const refs = secretReferences(input.websites);
  const referenced = new Set(refs.map((r) => r.key));
  for (const key of Object.keys(values).sort()) {
    if ((STACK_KEYS as readonly string[]).includes(key) || referenced.has(key)) continue;
    problems.push(
      problem(
        [key],
        `unknown key${suggestion(key, STACK_KEYS)} (a secret key belongs here only when a website's secretSettings names it)`,
      ),
    );
  }

  const parsed = stackConfigSchema.safeParse(input, { reportInput: true, error: friendlyMessage });
  if (!parsed.success) problems.push(...issuesToProblems(parsed.error.issues, knownKeysAt));
  // Where the plan's problems go, if the config is not planned: beside the schema's.
  const planProblemsAt = problems.length;
  if (input.target === "ec2" && input.ec2 === undefined && values.ec2 === undefined) {
    problems.push(
      problem(["ec2"], "is required when target is ec2: set region, instanceType, runnerCidrs and sshPublicKey"),
    );
  }
  if (input.target === "hosts" && input.hosts === undefined && values.hosts === undefined) {
    problems.push(
      problem(
        ["hosts"],
        "is required when target is hosts: set env and computers.<name>, each with address, user and hostKey",
      ),
    );
  }

  problems.push(
    ...secretReferenceProblems(
      refs,
      (key) => (values[key] === undefined ? "unset" : values[key].secret ? "secret" : "plaintext"),
      stack,
    ),
  );

  const secretKeys = [...referenced].filter((k) => values[k]?.secret === true).sort();
  // A config with problems of its own is not planned, so the plan's rules are judged here, on every part that passed,
  // beside them: one run lists every problem of the file, whatever else is wrong with it.
  if (problems.length > 0 || !parsed.success) {
    const { config, parts } = parsed.success
      ? { config: parsed.data, parts: { websites: true, computers: true } }
      : parsedParts(input);
    problems.splice(planProblemsAt, 0, ...planProblemsOfParts(config, stack, parts));
    return { secretKeys, problems };
  }
  return { config: parsed.data, secretKeys, problems };
}

/**
 * Keys of the stack's whole config whose namespace looks like a typo of ours (`multenv:websites`):
 * nothing would read them, so they are refused like any unknown key.
 */
export function namespaceProblems(fullKeys: Iterable<string>): Problem[] {
  const problems: Problem[] = [];
  for (const fullKey of fullKeys) {
    const colon = fullKey.indexOf(":");
    if (colon <= 0) continue;
    const namespace = fullKey.slice(0, colon);
    if (namespace !== CONFIG_NAMESPACE && editDistance(namespace.toLowerCase(), CONFIG_NAMESPACE) <= 2) {
      problems.push(
        problem(
          "",
          `config key ${quote(fullKey)} is in namespace ${namespace}, which nothing reads; did you mean ${CONFIG_NAMESPACE}:${fullKey.slice(colon + 1)}?`,
        ),
      );
    }
  }
  return problems;
}
