// multienv-capture-server: serves one website container's captures folder to the gateway (see server.ts). Run in
// the container's pod beside its tcpdump as `node /opt/multienv/capture-server.js` (the gateway image), configured
// by MULTIENV_CAPTURE_SERVER_CONFIG and MULTIENV_CAPTURE_TOKEN. Once serving it prints one line
// `{"event":"listening","host","port","container"}`; a bad config or token exits 2 with one line naming the field,
// a failed listen exits 1.
import { ServiceConfigError } from "../protocol/service-config";
import { logJsonLine } from "../service-kit/log";
import { readCaptureServerEnv } from "./config";
import { start } from "./server";

function exitWith(message: string, code: number): never {
  process.stderr.write(`multienv-capture-server: ${message}\n`);
  process.exit(code);
}

function load(): ReturnType<typeof readCaptureServerEnv> {
  try {
    return readCaptureServerEnv(process.env);
  } catch (error) {
    if (error instanceof ServiceConfigError) exitWith(error.message, 2);
    throw error;
  }
}

process.on("uncaughtException", (error) => {
  logJsonLine("crashed", { pid: process.pid, error: error.stack ?? String(error) });
  process.exit(1);
});
const { config, token } = load();
start(config, token)
  .then((running) => {
    logJsonLine("listening", { host: config.listen.host, port: running.port, container: config.container });
    const stop = () => running.close().then(() => process.exit(0));
    process.once("SIGTERM", stop);
    process.once("SIGINT", stop);
  })
  .catch((error: Error) =>
    exitWith(`cannot listen on ${config.listen.host}:${config.listen.port}: ${error.message}`, 1),
  );
