// What `multienv up` prints once the env is up: where an agent connects and the commands an operator uses next.
import { isPortForwardUrl, type StackOutputs } from "../stack/outputs";

/** The next steps after deploying `stack`, a few lines for a terminal. */
export function nextSteps(stack: string, outputs: Pick<StackOutputs, "computers"> & { gatewayUrl?: string }): string[] {
  const computers = Object.entries(outputs.computers);
  const lines = ["Next steps:"];
  // On the kubernetes target the URLs name the gateway's pod: a port-forward makes them dialable, for its process.
  if (outputs.gatewayUrl !== undefined && isPortForwardUrl(outputs.gatewayUrl)) {
    lines.push(
      `  the gateway (${outputs.gatewayUrl}) is reached through a port-forward to its pod: the multienv commands open one each;`,
      `  a test runner gets a local URL with gatewayAccess("${stack}") (valid while its process lives) and localOutputs(outputs, access.gatewayUrl)`,
    );
  } else for (const [name, computer] of computers) lines.push(`  computer ${name}'s DevTools: ${computer.cdpUrl}`);
  if (computers.length > 0 && (outputs.gatewayUrl === undefined || !isPortForwardUrl(outputs.gatewayUrl))) {
    const [firstName, first] = computers[0];
    lines.push(
      `  an agent connects with Playwright: chromium.connectOverCDP("${first.cdpUrl}", { headers: { Authorization: "Bearer <agent token>" } })`,
      `  its agent token (agentTokens.${firstName}, which opens that computer's DevTools alone): multienv outputs ${stack} --show-secrets`,
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
