// How many resources the program declared, as it tells the runner: one debug diagnostic, written once the env is
// declared. The engine puts debug diagnostics in the event stream the Automation API reads but a plain `pulumi up`
// does not show them, so the runner's progress reads done/total without a preview of its own (an engine run of
// several seconds) and the CLI's display stays as it was. The SDK sends its log lines one at a time, so the count
// reaches the engine behind the debug lines of each registration: the first components may finish before it.

const PREFIX = "multienv: resources declared: ";

/** True for a resource type the engine takes a step on that progress counts: not the stack, not a provider. */
export function countsAsStep(type: string): boolean {
  return type !== "pulumi:pulumi:Stack" && !type.startsWith("pulumi:providers:");
}

/** The diagnostic's text for `count` resources. */
export function formatDeclaredResources(count: number): string {
  return `${PREFIX}${count}`;
}

/** The count a diagnostic's text carries, when it is this one; otherwise undefined. */
export function parseDeclaredResources(text: string): number | undefined {
  const trimmed = text.trim();
  if (!trimmed.startsWith(PREFIX)) return undefined;
  const digits = trimmed.slice(PREFIX.length);
  if (!/^\d{1,9}$/.test(digits)) return undefined;
  return Number(digits);
}
