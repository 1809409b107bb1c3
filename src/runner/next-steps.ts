// What `multienv up` prints once the env is up: where an agent connects and the commands an operator uses next.
import type { StackOutputs } from "./outputs";

/** The next steps after deploying `stack`, a few lines for a terminal. */
export function nextSteps(stack: string, outputs: Pick<StackOutputs, "computers">): string[] {
  const computers = Object.entries(outputs.computers);
  const lines = ["Next steps:"];
  for (const [name, computer] of computers) lines.push(`  computer ${name}'s DevTools: ${computer.cdpUrl}`);
  if (computers.length > 0) {
    const [, first] = computers[0];
    lines.push(
      `  an agent connects with Playwright: chromium.connectOverCDP("${first.cdpUrl}", { headers: { Authorization: "Bearer <token>" } })`,
      `  the token (controlToken): multienv outputs ${stack} --show-secrets`,
    );
  }
  const commands: [string, string][] = [
    ["outputs", "the outputs again, without deploying"],
    ["screenshot", "a PNG of each computer's visible tab"],
    ["watch", "every computer's screen live, in a local web page"],
    ["reset", "the next episode on this env"],
    ["down", "collect the evidence, then destroy"],
  ];
  const width = Math.max(...commands.map(([command]) => `multienv ${command} ${stack}`.length));
  for (const [command, what] of commands) lines.push(`  ${`multienv ${command} ${stack}`.padEnd(width)}  ${what}`);
  return lines;
}
