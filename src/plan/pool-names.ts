// The names of a warm pool's members: stacks named after their task, `<task>-w<n>`. One rule, read where members are
// named (src/runner/pools) and where a stack of one's own is checked (check refuses a name a pool would take).

/** The n-th member's stack name: it starts with the task's. */
export function memberName(task: string, n: number): string {
  return `${task}-w${n}`;
}

/** The task whose warm pool would name a member `stack` (`<task>-w<n>`, n from 1), else undefined. */
export function memberTaskOf(stack: string): string | undefined {
  return /^(.+)-w[1-9]\d*$/.exec(stack)?.[1];
}
