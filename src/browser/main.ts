// Entry of the browser computer image: `node browser-launcher.js` with MULTIENV_BROWSER_CONFIG set.
import { ServiceConfigError } from "../protocol/service-config";
import { parseBrowserConfig } from "./config";
import { start } from "./launcher";

function main(): void {
  let config;
  try {
    config = parseBrowserConfig(process.env.MULTIENV_BROWSER_CONFIG);
  } catch (e) {
    if (e instanceof ServiceConfigError) {
      process.stderr.write(`multienv-browser: ${e.message}\n`);
      process.exit(2);
    }
    throw e;
  }
  start(config).then(
    (launcher) => {
      for (const sig of ["SIGTERM", "SIGINT"] as const)
        process.on(sig, () => void launcher.stop().then(() => process.exit(0)));
    },
    (e: Error) => {
      process.stderr.write(`multienv-browser: ${e.message}\n`);
      process.exit(1);
    },
  );
}

main();
