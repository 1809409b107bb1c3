// Site and computer names: syntax, reserved words, and collisions (docs/design.md "Rules": reserved site names).
//
// Site and computer names become container names (`<stack>-<site>-server`), network aliases
// (`<site>-server`), gateway path segments (`/svc/<site>/`, `/computers/<name>/`) and file names
// (`<site>-server.pcap0`). So they are lowercase DNS labels, and:
// - the words the env already uses for its own parts are reserved (RESERVED_NAMES);
// - a name may not end in a role suffix (ROLE_SUFFIXES): `shop-server` would give containers such as
//   `demo-shop-server-server`, which a reader cannot tell apart from site `shop`'s;
// - a site name may not start with `<stack>-`: site `demo-shop`'s alias `demo-shop-server` is the
//   container name of site `shop` in stack `demo`, and Docker's DNS would answer it twice;
// - a site and a computer may not share a name: one name, one thing, in containers, outputs and logs;
// - every name Docker's DNS answers (containers and aliases) must fit in one 63-character DNS label.
import { resourceNameProblem } from "../protocol/host-names";
import { problem, quote } from "./problems";
import { topologyNames } from "./topology";
import type { Problem } from "./types";

export const RESERVED_NAMES: readonly string[] = [
  "gateway",
  "proxy",
  "ingress",
  "egress",
  "env",
  "captures",
  "capture",
  "computers",
  "computer",
  "svc",
  "website",
  "websites",
  "traffic",
  "healthz",
  "server",
  "frontend",
  "browser",
  "net",
  "ca",
];

export const ROLE_SUFFIXES: readonly string[] = ["-server", "-frontend", "-replay", "-capture", "-proxy", "-browser"];

const MAX_LABEL = 63;

/** Why the stack name cannot name Docker resources, or undefined. */
export function stackNameProblem(stack: string): string | undefined {
  if (/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(stack) && stack.length <= 40) return undefined;
  return `stack ${quote(stack)}: a stack name must be lowercase letters, digits and inner hyphens, at most 40 characters, since it prefixes every container name`;
}

function nameProblems(kind: "websites" | "computers", name: string, stack: string): Problem[] {
  const path = [kind, name];
  const what = kind === "websites" ? "site" : "computer";
  const syntax = resourceNameProblem(name);
  if (syntax !== undefined) return [problem(path, `${what} name ${quote(name)} ${syntax}`)];
  if (RESERVED_NAMES.includes(name)) {
    return [problem(path, `${what} name ${quote(name)} is reserved for the env's own parts; choose another name`)];
  }
  const suffix = ROLE_SUFFIXES.find((s) => name.endsWith(s));
  if (suffix !== undefined) {
    return [
      problem(
        path,
        `${what} name ${quote(name)} ends in ${quote(suffix)}, which container names use for roles; choose another name`,
      ),
    ];
  }
  if (kind === "websites" && name.startsWith(`${stack}-`)) {
    return [
      problem(
        path,
        `site name ${quote(name)} starts with the stack name ${quote(`${stack}-`)}, so its network alias would be another site's container name; choose another name`,
      ),
    ];
  }
  const resolvable =
    kind === "websites"
      ? [topologyNames.siteAlias(name, "frontend"), topologyNames.siteContainer(stack, name, "frontend")]
      : [topologyNames.browser(stack, name), topologyNames.siteProxy(stack, name)];
  const tooLong = resolvable.find((n) => n.length > MAX_LABEL);
  if (tooLong !== undefined) {
    return [
      problem(
        path,
        `${what} name ${quote(name)} makes the container name ${quote(tooLong)}, longer than the ${MAX_LABEL} characters of a DNS label; shorten the ${what} or stack name`,
      ),
    ];
  }
  return [];
}

/** Problems with the names of sites and computers in `config` for stack `stack`; only the names are read. */
export function namingProblems(
  config: { websites: Record<string, unknown>; computers: Record<string, unknown> },
  stack: string,
): Problem[] {
  const problems: Problem[] = [];
  for (const site of Object.keys(config.websites).sort()) problems.push(...nameProblems("websites", site, stack));
  for (const computer of Object.keys(config.computers).sort()) {
    problems.push(...nameProblems("computers", computer, stack));
    if (Object.hasOwn(config.websites, computer)) {
      problems.push(
        problem(
          ["computers", computer],
          `computer ${quote(computer)} has the name of a website; a site and a computer each need their own name`,
        ),
      );
    }
  }
  return problems;
}
