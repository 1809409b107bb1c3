// multienv-site-proxy: reads MULTIENV_SITE_PROXY_CONFIG, starts the proxy and prints its startup line (with the
// bound ports) on stdout. A bad configuration is one line naming the field, and exit status 2.
import { configFromEnv, controlTokenFromEnv } from "./config";
import { ServiceConfigError } from "../protocol/service-config";
import { BAD_CONFIG_EXIT, STANDBY_ENV, StandbyMessage } from "./supervision";

/** A configuration the proxy cannot start with: one line naming the field, and the status the supervisor heeds. */
function refuseConfig(err: unknown): never {
  if (!(err instanceof ServiceConfigError)) throw err;
  process.stderr.write(`multienv-site-proxy: ${err.message}\n`);
  process.exit(BAD_CONFIG_EXIT);
}

async function main(): Promise<void> {
  let config;
  let token;
  try {
    config = configFromEnv();
    token = config.control ? controlTokenFromEnv() : undefined;
  } catch (err) {
    refuseConfig(err);
  }
  // Loaded only once the configuration is good: a bad one is reported without loading the TLS machinery.
  const { startSiteProxy } = require("./start") as typeof import("./start");
  if (process.env[STANDBY_ENV] === "1" && process.send) await standBy();
  const running = await startSiteProxy(config, token).catch(refuseConfig);
  // A proxy outlives a bug in one connection: the error is a log line, and the proxy goes on serving the others.
  process.on("uncaughtException", (err) =>
    running.log.write({ event: "error", error: `uncaught: ${err.stack ?? err.message}` }),
  );
  process.on("unhandledRejection", (err) =>
    running.log.write({ event: "error", error: `unhandled rejection: ${String(err)}` }),
  );
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    process.once(signal, () => {
      // Open connections end with the process; only the logs' last lines are worth waiting for.
      Promise.all([running.log.close(), running.recorder?.close()]).finally(() => process.exit(0));
      setTimeout(() => process.exit(0), 1_000).unref();
    });
  }
  const { event, ...rest } = running.startup;
  process.stdout.write(JSON.stringify({ event, time: new Date().toISOString(), ...rest }) + "\n");
}

/** Under the supervisor: everything is loaded; say so and wait to be told to serve (see supervisor.ts). */
function standBy(): Promise<void> {
  // Without its supervisor a waiting or serving process has no one to answer to: the container is going away.
  process.on("disconnect", () => process.exit(0));
  return new Promise((resolve) => {
    process.on("message", (message) => message === StandbyMessage.start && resolve());
    process.send!(StandbyMessage.ready);
  });
}

main().catch((err: Error) => {
  process.stderr.write(`multienv-site-proxy: cannot start: ${err.message}\n`);
  process.exit(1);
});
