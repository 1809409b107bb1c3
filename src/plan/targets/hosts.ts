// The hosts target's refusals: a host for every computer and none for others, each role on a host of its own.
import { problem } from "../problems";
import type { Problem, StackConfig } from "../types";

/** Refusals of the hosts section: a host for every computer and none for others, each role on its own host. */
export function hostsProblems(config: StackConfig): Problem[] {
  const hosts = config.hosts;
  if (config.target !== "hosts" || hosts === undefined) return [];
  const problems: Problem[] = [];
  for (const name of Object.keys(config.computers).sort()) {
    if (hosts.computers[name] === undefined)
      problems.push(
        problem(["hosts", "computers", name], `is missing: computer ${name} needs a host (address, user, hostKey)`),
      );
  }
  for (const name of Object.keys(hosts.computers).sort()) {
    if (config.computers[name] === undefined)
      problems.push(
        problem(
          ["hosts", "computers", name],
          `names no computer of this stack (computers: ${Object.keys(config.computers).sort().join(", ") || "none"}); remove it`,
        ),
      );
  }
  const seen = new Map<string, string>();
  const roles: [string[], { address: string; port?: number }][] = [
    [["hosts", "env"], hosts.env],
    ...Object.entries(hosts.computers)
      .sort()
      .map(([n, h]) => [["hosts", "computers", n], h] as [string[], typeof h]),
  ];
  for (const [path, host] of roles) {
    const key = `${host.address}:${host.port ?? 22}`;
    const other = seen.get(key);
    if (other !== undefined)
      problems.push(
        problem(
          path,
          `is the same host as ${other} (${key}); each role needs a host of its own (the ports its containers publish would collide)`,
        ),
      );
    else seen.set(key, path.join("."));
  }
  return problems;
}
