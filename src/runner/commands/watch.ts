// `multienv watch <stack>`: a local page showing every computer's screen live; runs until interrupted.
import type { Command } from "commander";
import { checkFirst, type CommonOptions, note, runAction, say, withProjectDir } from "./common";

interface WatchOptions extends CommonOptions {
  port: string;
}

export function register(program: Command): void {
  withProjectDir(
    program
      .command("watch")
      .description(
        "serve a local, read-only web page (127.0.0.1, its URL carrying a secret made for this run) showing every computer's screen live with its URL and its proxy log's requests and refusals; runs until Ctrl-C",
      )
      .argument("<stack>", "the stack (task) name")
      .option("--port <port>", "the local port (default: a free one)", "0"),
  ).action((stack: string, options: WatchOptions) =>
    runAction("watch", async () => {
      const port = Number(options.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535)
        throw new Error(`--port ${options.port}: give a port number from 0 to 65535 (0: a free one)`);
      await checkFirst(stack, options, "deployed");
      const { watchStack } = require("../index") as typeof import("../index");
      const server = await watchStack(stack, { projectDir: options.projectDir, port });
      say(server.url);
      note(`stack ${stack}: watching; open the URL above on this machine (it is this run's secret). Ctrl-C stops.`);
      await new Promise<void>((resolve) => {
        const stop = () => {
          process.off("SIGINT", stop);
          process.off("SIGTERM", stop);
          void server.close().then(resolve, resolve);
        };
        process.on("SIGINT", stop);
        process.on("SIGTERM", stop);
      });
    }),
  );
}
