// `multienv watch <stack>`: a local page showing every computer's screen live, from which a person may take a computer
// over; runs until interrupted. `multienv takeover <stack> --computer <c>`: the same page with that computer taken at
// once; it ends when the computer is handed back (from the page, or by closing it) or on Ctrl-C, which hands it back.
import type { Command } from "commander";
import { MAX_OPERATOR_CHARS } from "../../protocol/takeover";
import { checkFirst, type CommonOptions, note, runAction, say, withProjectDir } from "./common";

interface WatchOptions extends CommonOptions {
  port: string;
  operator?: string;
}

interface TakeoverOptions extends WatchOptions {
  computer: string;
}

function portOf(options: WatchOptions): number {
  const port = Number(options.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(`--port ${options.port}: give a port number from 0 to 65535 (0: a free one)`);
  return port;
}

function operatorOf(options: WatchOptions): string | undefined {
  const operator = options.operator;
  if (operator === undefined) return undefined;
  if (!/^[\x21-\x7e][\x20-\x7e]*$/.test(operator) || operator.length > MAX_OPERATOR_CHARS)
    throw new Error(
      `--operator: give a name of 1 to ${MAX_OPERATOR_CHARS} printable ASCII characters, starting with a visible one`,
    );
  return operator;
}

const OPERATOR_HELP = "the person's name in the takeover's evidence (default: this OS user)";

export function register(program: Command): void {
  withProjectDir(
    program
      .command("watch")
      .description(
        "serve a local web page (127.0.0.1, its URL carrying a secret made for this run) showing every computer's screen live with its URL and its proxy log's requests and refusals, from which a person may take a computer over (the agent is held meanwhile) and hand it back; runs until Ctrl-C",
      )
      .argument("<stack>", "the stack (task) name")
      .option("--port <port>", "the local port (default: a free one)", "0")
      .option("--operator <name>", OPERATOR_HELP),
  ).action((stack: string, options: WatchOptions) =>
    runAction("watch", async () => {
      const port = portOf(options);
      const operator = operatorOf(options);
      await checkFirst(stack, options, "deployed");
      const { watchStack } = require("../index") as typeof import("../index");
      const server = await watchStack(stack, { projectDir: options.projectDir, port, operator });
      say(server.url);
      note(`stack ${stack}: watching; open the URL above on this machine (it is this run's secret). Ctrl-C stops.`);
      await untilInterrupted(() => server.close());
    }),
  );
  withProjectDir(
    program
      .command("takeover")
      .description(
        "take a computer over for a person: its agent is held, and the watch page's URL (127.0.0.1, with this run's secret) shows it taken, for the person's clicks, keys and pastes; the computer is handed back when the page hands it back or is closed, or on Ctrl-C",
      )
      .argument("<stack>", "the stack (task) name")
      .requiredOption("--computer <name>", "the computer to take over")
      .option("--port <port>", "the local port (default: a free one)", "0")
      .option("--operator <name>", OPERATOR_HELP),
  ).action((stack: string, options: TakeoverOptions) =>
    runAction("takeover", async () => {
      const port = portOf(options);
      const operator = operatorOf(options);
      await checkFirst(stack, options, "deployed");
      const { watchStack } = require("../index") as typeof import("../index");
      const server = await watchStack(stack, {
        projectDir: options.projectDir,
        port,
        operator,
        takeNow: options.computer,
      });
      say(server.url);
      note(
        `stack ${stack}: computer ${options.computer} is taken over, its agent held; open the URL above on this machine. Closing the page or Ctrl-C hands it back.`,
      );
      await Promise.race([untilInterrupted(() => server.close()), server.handedBack().then(() => server.close())]);
      note(`stack ${stack}: computer ${options.computer} is handed back to its agent; the takeover is in run.json.`);
    }),
  );
}

function untilInterrupted(close: () => Promise<void>): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = () => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      void close().then(resolve, resolve);
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
}
