// `multienv serve`: the warm pools over HTTP on 127.0.0.1, with a token of its own, until interrupted.
import type { Command } from "commander";
import { type CommonOptions, note, runAction, say, withProjectDir } from "./common";

interface ServeCliOptions extends CommonOptions {
  port: string;
  store?: string;
}

export function register(program: Command): void {
  withProjectDir(
    program
      .command("serve")
      .description(
        "serve the warm pools over HTTP on 127.0.0.1 (claims, renewals, releases, the pools' state; GET /v1/openapi.json) and keep every pool at its size; the token is written to .multienv/serve.token (mode 0600), never printed",
      )
      .option("--port <port>", "the port on 127.0.0.1", "7878")
      .option(
        "--store <postgres-url>",
        "the lease store shared by many machines (default: MULTIENV_POOL_STORE, else the embedded one)",
      ),
  ).action((options: ServeCliOptions) =>
    runAction("serve", async () => {
      if (!/^\d{1,5}$/.test(options.port) || Number(options.port) > 65535)
        throw new Error(`--port ${options.port}: not a port; pass 1 to 65535 (0: any free one)`);
      const { servePools } = require("../pools") as typeof import("../pools");
      const service = await servePools({
        projectDir: options.projectDir,
        store: options.store,
        port: Number(options.port),
        log: note,
      });
      say(`serving warm pools at ${service.url} (token in ${service.tokenFile}, sent as Authorization: Bearer)`);
      await new Promise<void>((resolve) => {
        const stop = () => resolve();
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
      });
      note("stopping: the resets under way finish first");
      await service.close();
    }),
  );
}
