// `multienv sweep`: finds what multienv left running on EC2 past an age (the VMs of a task nobody destroyed,
// the groups and key pairs of a deploy that failed half-way) by the stack tag every AWS resource carries, lists
// it, and with `yes` terminates the instances, then deletes the groups and key pairs of the swept stacks.
// It works on AWS alone, not on Pulumi state: a stack whose resources it removed is fixed with
// `pulumi refresh` (or `pulumi stack rm --force` when it is gone for good).
import { TAGS } from "../../../protocol/labels";
import type { Ec2Api, TaggedGroup, TaggedInstance, TaggedKeyPair } from "./ec2-api";
import { RunnerError } from "../../errors";

const UNIT_MS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** `90m`, `4h`, `2d`, `1d12h`, `1w` in milliseconds; a RunnerError naming the option otherwise. */
export function parseAge(text: string): number {
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)([mhdw])/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text.trim()) {
    throw new RunnerError(`--older-than ${JSON.stringify(text)}: expected an age such as 90m, 4h, 2d or 1d12h`);
  }
  return parts.reduce((ms, p) => ms + Number(p[1]) * UNIT_MS[p[2]], 0);
}

/** An age as a person reads it: `2d3h`, `5h12m`, `7m`. */
export function formatAge(ms: number): string {
  const minutes = Math.floor(ms / 60_000);
  const [d, h, m] = [Math.floor(minutes / 1440), Math.floor((minutes % 1440) / 60), minutes % 60];
  return d > 0 ? `${d}d${h}h` : h > 0 ? `${h}h${m}m` : `${m}m`;
}

export interface SweepOptions {
  api: Ec2Api;
  /** Resources younger than this are left alone. */
  olderThanMs: number;
  /** Terminate and delete; without it, only list. */
  yes: boolean;
  now?: Date;
  log?: (line: string) => void;
  /** How long to wait for the instances to be terminated before their groups can go (default 10 minutes). */
  terminationTimeoutMs?: number;
  pollMs?: number;
}

export interface SweepReport {
  instances: (TaggedInstance & { stack: string })[];
  groups: (TaggedGroup & { stack: string })[];
  keyPairs: (TaggedKeyPair & { stack: string })[];
  /** True when they were terminated and deleted, false when only listed. */
  swept: boolean;
}

const stackOf = (tags: Record<string, string>) => tags[TAGS.stack] ?? "";

/**
 * What is past the age: instances launched before the cutoff; key pairs created before it; and the groups of
 * the stacks those belong to, when none of the stack's instances is younger (a group in use cannot be deleted).
 */
export async function sweep(options: SweepOptions): Promise<SweepReport> {
  const { api } = options;
  const log = options.log ?? (() => undefined);
  const cutoff = (options.now ?? new Date()).getTime() - options.olderThanMs;
  const [instances, groups, keyPairs] = await Promise.all([
    api.instances(TAGS.stack),
    api.groups(TAGS.stack),
    api.keyPairs(TAGS.stack),
  ]);
  const oldInstances = instances
    .filter((i) => i.launchTime.getTime() < cutoff)
    .map((i) => ({ ...i, stack: stackOf(i.tags) }));
  const oldKeys = keyPairs
    .filter((k) => k.createTime.getTime() < cutoff)
    .map((k) => ({ ...k, stack: stackOf(k.tags) }));
  const stale = new Set([...oldInstances, ...oldKeys].map((r) => r.stack));
  const inUse = new Set(instances.filter((i) => i.launchTime.getTime() >= cutoff).map((i) => stackOf(i.tags)));
  const oldGroups = groups
    .filter((g) => stale.has(stackOf(g.tags)) && !inUse.has(stackOf(g.tags)))
    .map((g) => ({ ...g, stack: stackOf(g.tags) }));
  const now = options.now ?? new Date();
  for (const i of oldInstances)
    log(
      `instance ${i.id} (${i.tags.Name ?? ""}) stack ${i.stack}: ${i.state}, launched ${formatAge(now.getTime() - i.launchTime.getTime())} ago`,
    );
  for (const g of oldGroups) log(`security group ${g.id} (${g.name}) stack ${g.stack}`);
  for (const k of oldKeys)
    log(`key pair ${k.name} stack ${k.stack}: created ${formatAge(now.getTime() - k.createTime.getTime())} ago`);
  const report: SweepReport = { instances: oldInstances, groups: oldGroups, keyPairs: oldKeys, swept: false };
  if (!options.yes) return report;

  await api.terminate(oldInstances.map((i) => i.id));
  if (oldInstances.length > 0)
    log(`terminating ${oldInstances.length} instance(s); waiting for them to end before their groups can go`);
  // A group is deleted only once no instance (not even one shutting down) holds it.
  const deadline = Date.now() + (options.terminationTimeoutMs ?? 600_000);
  const ids = new Set(oldInstances.map((i) => i.id));
  while ((await api.instances(TAGS.stack)).some((i) => ids.has(i.id))) {
    if (Date.now() > deadline)
      throw new RunnerError(
        `the instances were asked to terminate but still exist after ${formatAge(options.terminationTimeoutMs ?? 600_000)}; run sweep again later to delete their groups`,
      );
    await new Promise((r) => setTimeout(r, options.pollMs ?? 5000));
  }
  // The env's group and its computers' groups name each other in their rules: empty them all before deleting any.
  const rules = await api.groupRules(oldGroups.map((g) => g.id));
  for (const g of oldGroups) {
    for (const egress of [false, true])
      await api.revokeRules(
        g.id,
        egress,
        rules.filter((r) => r.groupId === g.id && r.egress === egress).map((r) => r.id),
      );
  }
  for (const g of oldGroups) await api.deleteGroup(g.id);
  for (const k of oldKeys) await api.deleteKeyPair(k.id);
  log(
    `swept: ${oldInstances.length} instance(s) terminated, ${oldGroups.length} security group(s) and ${oldKeys.length} key pair(s) deleted`,
  );
  return { ...report, swept: true };
}
