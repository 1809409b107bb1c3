// What the deploy's self-test found, as its dynamic resource's outputs hold it and the stack's `selfTest` output
// exports it: plain data, shared by the self-test's provider, its error's text and the runner.

/** One check of the deploy's self-test. */
export interface SelfTestCheckResult {
  check: string;
  url: string;
  ok: boolean;
  /** What was seen: the status and who answered, or the browser's error. */
  detail: string;
}

/** What the deploy's self-test found (it fails the deploy when a check fails, so a deployed env shows `passed`). */
export interface SelfTestResults {
  passed: boolean;
  finishedAt: string;
  seconds: number;
  /** Computer -> its network checks. */
  computers: Record<string, SelfTestCheckResult[]>;
  /** Computer -> its start tabs, each at a name a site's card declares. */
  startTabs: Record<string, SelfTestCheckResult[]>;
}

export type SelfTestOutput = SelfTestResults | { skipped: true };
