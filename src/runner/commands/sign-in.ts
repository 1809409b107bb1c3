// `multienv sign-in <stack> --site <s> --computer <c>`: load a site's session into a computer's browser.
import type { Command } from "commander";
import { checkFirst, type CommonOptions, runAction, say, withProjectDir } from "./common";

interface SignInOptions extends CommonOptions {
  site: string;
  computer: string;
  signOut?: boolean;
}

export function register(program: Command): void {
  withProjectDir(
    program
      .command("sign-in")
      .description(
        "load a site's session (its /session, Playwright storage state) into a computer's browser over DevTools through the gateway",
      )
      .argument("<stack>", "the stack (task) name")
      .requiredOption("--site <site>", "the website whose session to load")
      .requiredOption("--computer <computer>", "the computer whose browser to sign in")
      .option("--sign-out", "sign the browser out of the site instead: remove its cookies and storage"),
  ).action((stack: string, options: SignInOptions) =>
    runAction("sign-in", async () => {
      await checkFirst(stack, options, "deployed");
      const { signIn, signOut } = require("../index") as typeof import("../index");
      const target = { projectDir: options.projectDir, site: options.site, computer: options.computer };
      if (options.signOut) {
        const done = await signOut(stack, target);
        say(
          `stack ${stack}: computer ${options.computer} signed out of ${options.site} (${done.cookies} cookies removed, storage of ${done.origins} origins cleared)`,
        );
      } else {
        const done = await signIn(stack, target);
        say(
          `stack ${stack}: computer ${options.computer} signed in to ${options.site} (${done.cookies} cookies, local storage of ${done.origins} origins)`,
        );
      }
    }),
  );
}
