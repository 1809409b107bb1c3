// The runner's `up` and `destroy` (src/runner/stack/operations.ts) under the real engine, on a project of a few
// lines: the outputs come off the engine's events, masked as the CLI masks them, and no CLI run follows the engine's.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalWorkspace, PulumiCommand, Stack } from "@pulumi/pulumi/automation";
import * as operations from "../../src/runner/stack/operations";
import { displayOutputs } from "../../src/runner/stack/outputs";

const REPO = path.resolve(__dirname, "../..");

/** The method every CLI run of a workspace goes through (left out of the SDK's type declarations). */
interface CommandRunner {
  run(args: string[], cwd: string, env: Record<string, string>, ...rest: unknown[]): Promise<{ stdout: string }>;
}

/** A program with plain outputs, a secret one, and one holding a secret inside. */
const PROGRAM = `const pulumi = require("@pulumi/pulumi");
module.exports = {
  plain: "hello",
  nested: { a: 1, b: [1, 2] },
  token: pulumi.secret("s3cret"),
  holdsSecret: { x: 1, y: pulumi.secret("inner") },
  url: "http://127.0.0.1:8080/x",
};
`;

let dir: string;
let stack: Stack;
/** The CLI commands the workspace ran, each as its first two words, in order. */
const commands: string[] = [];

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-operations-"));
  fs.writeFileSync(path.join(dir, "Pulumi.yaml"), "name: operations\nruntime: nodejs\n");
  fs.writeFileSync(path.join(dir, "package.json"), '{"name":"operations","main":"index.js"}\n');
  fs.writeFileSync(path.join(dir, "index.js"), PROGRAM);
  fs.symlinkSync(path.join(REPO, "node_modules"), path.join(dir, "node_modules"));
  const cli = (await PulumiCommand.get({ skipVersionCheck: true })) as PulumiCommand & CommandRunner;
  const counting = Object.create(cli, {
    run: {
      value: (args: string[], cwd: string, env: Record<string, string>, ...rest: unknown[]) => {
        commands.push(args.slice(0, 2).join(" "));
        return cli.run(args, cwd, env, ...rest);
      },
    },
  }) as PulumiCommand;
  const workspace = await LocalWorkspace.create({ workDir: dir, pulumiCommand: counting });
  stack = await Stack.createOrSelect("operations", workspace);
}, 60_000);

afterAll(async () => {
  for (const name of ["operations", "operations-masked"])
    await stack?.workspace.removeStack(name, { force: true }).catch(() => undefined);
  fs.rmSync(dir, { recursive: true, force: true });
});

describe("the runner's up and destroy", () => {
  it("return the outputs the CLI shows, every secret masked, with no CLI run after the engine's", async () => {
    for (const round of ["a first up", "an up with no change"]) {
      commands.length = 0;
      const result = await operations.up(stack);
      expect(commands, round).toEqual(["up --yes"]);
      const masked = JSON.parse(
        execFileSync("pulumi", ["stack", "output", "--json", "--stack", "operations"], { cwd: dir }).toString(),
      );
      expect(displayOutputs(result.outputs), round).toEqual({ ...masked, holdsSecret: "[secret]" });
      expect(result.outputs.token, round).toEqual({ value: "[secret]", secret: true });
      expect(result.outputs.nested, round).toEqual({ value: { a: 1, b: [1, 2] }, secret: false });
      // A value holding a secret is masked whole: the event has no secret's value to show beside the rest.
      expect(result.outputs.holdsSecret, round).toEqual({ value: "[secret]", secret: true });
    }
    // The values themselves, for a caller that shows secrets, are the CLI's to give.
    expect((await stack.outputs()).token).toEqual({ value: "s3cret", secret: true });
  });

  it("asks the CLI for the outputs when the engine masked a secret's text inside a plain one", async () => {
    // The engine masks any text equal to a secret config value in what it sends, here the port inside `url`.
    const masked = await Stack.createOrSelect("operations-masked", stack.workspace);
    await masked.setConfig("port", { value: "8080", secret: true });
    commands.length = 0;
    const result = await operations.up(masked);
    expect(result.outputs.url).toEqual({ value: "http://127.0.0.1:8080/x", secret: false });
    expect(result.outputs.token, "a secret's value stays out all the same").toEqual({
      value: "[secret]",
      secret: true,
    });
    expect(commands).toContain("stack output");
    await operations.destroy(masked);
  });

  it("destroys with no CLI run after the engine's", async () => {
    commands.length = 0;
    await operations.destroy(stack);
    expect(commands).toEqual(["destroy --yes"]);
    expect(await stack.outputs()).toEqual({});
  });
});
