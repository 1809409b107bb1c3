// How `ls`, `status` and `screenshot` read at a terminal. Pure: the JSON forms are the library's objects as they are.
import type { StackList, StackStatus } from "./operator";
import type { Screenshot } from "./screens";
import { printable } from "../terminal-text";

/** Rows as columns, each as wide as its widest cell, two spaces apart. */
export function table(rows: string[][]): string[] {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((row) => (row[i] ?? "").length))) ?? [];
  return rows.map((row) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i])))
      .join("  ")
      .trimEnd(),
  );
}

/**
 * `ls`: a table of the stacks, or a line saying there is none; under it, for each env deployed live, why (which site,
 * which computer and its reach).
 */
export function formatStackList(list: StackList): string {
  if (list.stacks.length === 0) return "no stacks in the state; `multienv up <stack>` deploys one";
  const rows = [
    [
      "STACK",
      "TARGET",
      "DEPLOYED",
      "LAST UPDATED",
      "RUNNING",
      "HEALTHY",
      "EPISODES",
      "REPRODUCIBLE",
      "PERSON",
      "ACCOUNTS",
    ],
    ...list.stacks.map((s) => [
      s.stack,
      s.target ?? "?",
      s.deployed ? "yes" : "no",
      // To the second: the state records nanoseconds.
      s.lastUpdated?.replace(/\.\d+Z$/, "Z") ?? "never",
      `${s.containers.running}/${s.containers.total}`,
      `${s.containers.healthy}/${s.containers.total}`,
      String(s.episodes),
      s.reproducible === null ? "-" : s.reproducible ? "yes" : "no",
      personCell(s),
      // pool/account per pooled site: which account of a pool the task signs in as.
      Object.values(s.accounts ?? {})
        .map((a) => `${a.pool}/${a.account}`)
        .join(",") || "-",
    ]),
  ];
  const live = list.stacks
    .filter((s) => s.live === true)
    .map((s) => `${s.stack} is live, not reproducible: ${s.liveReasons.map((r) => printable(r.why)).join("; ")}`);
  return [...table(rows), ...(live.length > 0 ? ["", ...live] : [])].join("\n");
}

/**
 * `ls`'s PERSON: each computer a person holds (`<c>:taken(<operator>)`) or whose agent asks for one (`<c>:asks`); `?`
 * for a deployed env whose gateway did not answer; `-` otherwise.
 */
function personCell(s: StackList["stacks"][number]): string {
  if (s.persons === null) return s.deployed ? "?" : "-";
  const marks = Object.entries(s.persons).map(([computer, { taken, request }]) =>
    taken !== undefined ? `${computer}:taken(${taken.operator})` : request !== undefined ? `${computer}:asks` : "",
  );
  return printable(marks.filter((m) => m !== "").join(",")) || "-";
}

function kib(bytes: number): string {
  return bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(1)} KiB`;
}

/** `status`: the report, section by section, then the verdict. */
export function formatStatus(status: StackStatus): string {
  const out: string[] = [`stack ${status.stack}: ${status.healthy ? "healthy" : "NOT healthy"}`];
  // A kubernetes env's are pods: their restarts and why one waits are shown too.
  const pods = status.containers.some((c) => c.kind === "pod");
  out.push(pods ? "pods:" : "containers:");
  out.push(
    ...table(
      status.containers.map((c) => [
        `  ${c.name}`,
        c.state,
        c.health ?? "-",
        ...(pods ? [`${c.restarts ?? 0} restarts`] : []),
        c.engine,
        ...(c.node !== undefined ? [`node ${c.node}${c.nodeNotReady !== undefined ? " (NOT Ready)" : ""}`] : []),
        ...(c.reason !== undefined ? [c.reason] : []),
        ...(c.error !== undefined ? [c.error] : []),
      ]),
    ),
  );
  const { healthz } = status.gateway;
  out.push(
    `gateway: ${status.gateway.url} /healthz ${healthz.ok ? `ready (HTTP ${healthz.status})` : `not ready (${healthz.error ?? `HTTP ${healthz.status}`})`}`,
  );
  out.push("computers:");
  for (const [name, computer] of Object.entries(status.computers)) {
    if (computer.error !== undefined) {
      out.push(`  ${name}: DevTools did not answer: ${computer.error}`);
      continue;
    }
    out.push(`  ${name}: ${computer.tabs.length} tab${computer.tabs.length === 1 ? "" : "s"}`);
    const { taken, request } = computer.takeover ?? {};
    if (taken !== undefined) out.push(`    taken over by ${taken.operator} since ${taken.since}`);
    if (request !== undefined) out.push(`    its agent asks for a person until ${request.deadline}: ${request.reason}`);
    for (const tab of computer.tabs) out.push(`    ${tab.url}${tab.title ? `  "${tab.title}"` : ""}`);
  }
  const selfTest = status.selfTest;
  if ("skipped" in selfTest) out.push("self-test: skipped");
  else {
    out.push(`self-test: ${selfTest.passed ? "passed" : "FAILED"} (${selfTest.finishedAt})`);
    for (const failure of selfTest.failed) out.push(`  ${failure}`);
  }
  const { captures, proxyLogs, captureTraffic } = status.evidence;
  out.push("evidence:");
  if (!captureTraffic) out.push("  captures: off");
  else if (captures === undefined || "error" in captures)
    out.push(`  captures: the listing failed: ${captures?.error ?? "no answer"}`);
  else out.push(`  captures: ${captures.count} file${captures.count === 1 ? "" : "s"}, ${kib(captures.bytes)}`);
  for (const [computer, log] of Object.entries(proxyLogs)) {
    if ("error" in log) out.push(`  ${computer}'s proxy log: ${log.error}`);
    else
      out.push(
        `  ${computer}'s proxy log: ${kib(log.bytes)}, ${log.lines} lines (${log.requests} requests, ${log.refused} refused)`,
      );
  }
  if (!status.healthy) {
    out.push("not healthy:");
    for (const problem of status.problems) out.push(`  ${problem}`);
  }
  // A page's title or a self-test's finding is the site's text: a line break in one stays inside its line.
  return out.map(printable).join("\n");
}

/** `screenshot`: one line per file. */
export function formatScreenshots(shots: Screenshot[]): string {
  return shots.map((s) => printable(`${s.file} (${s.bytes} bytes): computer ${s.computer} at ${s.url}`)).join("\n");
}
