// multienv is a package a harness imports by name: `npm pack` builds it (prepack: tsc to dist/, with declarations),
// and its tarball, unpacked into an empty project's node_modules, serves `import ... from "multienv"` and
// `multienv/components` with their types (tsc checks a harness against them, and refuses a wrong call) and runs the
// stack file's check from the build. The project has no network: its other packages are this checkout's, linked in.
// The unit tier: it needs no engine, only the minutes tsc takes to build the package.
import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cleanup, ROOT, tempDir } from "../helpers/processes";

const run = promisify(execFile);
const TSC = path.join(ROOT, "node_modules", "typescript", "bin", "tsc");

let project: string;

/** Type-checks (and emits to out/) the project's harness.ts, or returns tsc's errors (minutes on a loaded machine). */
async function typeCheck(): Promise<{ ok: boolean; output: string }> {
  try {
    await run(process.execPath, [TSC, "-p", project], { cwd: project });
    return { ok: true, output: "" };
  } catch (error) {
    const failure = error as { stdout?: string; stderr?: string };
    return { ok: false, output: `${failure.stdout ?? ""}${failure.stderr ?? ""}` };
  }
}

beforeAll(async () => {
  const packed = tempDir("multienv-pack-");
  const { stdout } = await run("npm", ["pack", "--pack-destination", packed], {
    cwd: ROOT,
    maxBuffer: 64 * 1024 * 1024,
  });
  const tarball = path.join(packed, stdout.trim().split("\n").pop()!);
  project = tempDir("multienv-harness-");
  const installed = path.join(project, "node_modules", "multienv");
  fs.mkdirSync(installed, { recursive: true });
  await run("tar", ["-xzf", tarball, "-C", installed, "--strip-components=1"]);
  for (const entry of fs.readdirSync(path.join(ROOT, "node_modules"))) {
    if (entry === ".bin" || entry === "multienv") continue;
    fs.symlinkSync(path.join(ROOT, "node_modules", entry), path.join(project, "node_modules", entry));
  }
  fs.writeFileSync(path.join(project, "package.json"), JSON.stringify({ name: "harness", private: true }));
  fs.writeFileSync(
    path.join(project, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "nodenext",
        moduleResolution: "nodenext",
        strict: true,
        skipLibCheck: true,
        types: ["node"],
        outDir: "out",
      },
      files: ["harness.ts"],
    }),
  );
}, 600_000);

afterAll(cleanup);

describe("the packed package, installed by name", () => {
  it("carries its build and declarations, and only what it needs", () => {
    const installed = path.join(project, "node_modules", "multienv");
    const manifest = JSON.parse(fs.readFileSync(path.join(installed, "package.json"), "utf8"));
    expect(fs.existsSync(path.join(installed, manifest.main))).toBe(true);
    expect(fs.existsSync(path.join(installed, manifest.types))).toBe(true);
    expect(fs.existsSync(path.join(installed, "dist", "components", "index.d.ts"))).toBe(true);
    expect(fs.existsSync(path.join(installed, "Pulumi.yaml"))).toBe(true);
    expect(fs.existsSync(path.join(installed, "test"))).toBe(false);
    expect(fs.existsSync(path.join(installed, "dist", "test"))).toBe(false);
  });

  it("type-checks a harness against its declarations, and refuses a wrong call", async () => {
    fs.writeFileSync(
      path.join(project, "harness.ts"),
      [
        'import { checkStackFile, deployStack, type DeployResult, type StackConfig } from "multienv";',
        'import type { MultiEnvArgs } from "multienv/components";',
        "export const deploy: (stack: string) => Promise<DeployResult> = (stack) => deployStack(stack);",
        'export const targetOf = (config: StackConfig): StackConfig["target"] => config.target;',
        'export type Plan = MultiEnvArgs["plan"];',
        "export async function main(file: string): Promise<void> {",
        "  const check = await checkStackFile(file);",
        '  console.log(JSON.stringify({ ok: check.ok, problems: check.problems, entry: require.resolve("multienv") }));',
        "}",
        "void main(process.argv[2]);",
      ].join("\n"),
    );
    const accepted = await typeCheck();
    expect(accepted.output).toBe("");
    expect(accepted.ok).toBe(true);
    fs.renameSync(path.join(project, "out", "harness.js"), path.join(project, "harness.js"));

    fs.writeFileSync(
      path.join(project, "harness.ts"),
      'import { deployStack } from "multienv";\nexport const wrong = deployStack(42);\n',
    );
    const refused = await typeCheck();
    expect(refused.ok).toBe(false);
    expect(refused.output).toMatch(/harness\.ts.*Argument of type 'number'/);
  }, 600_000);

  it("runs the stack file's check from the build it resolves by name", async () => {
    const stackFile = path.join(project, "Pulumi.harness.yaml");
    const checkOf = async () => {
      const { stdout } = await run(process.execPath, ["harness.js", stackFile], { cwd: project });
      return JSON.parse(stdout) as { ok: boolean; problems: string[]; entry: string };
    };

    fs.writeFileSync(stackFile, fs.readFileSync(path.join(ROOT, "stacks", "Pulumi.demo.yaml")));
    const passed = await checkOf();
    expect(passed.problems).toEqual([]);
    expect(passed.ok).toBe(true);
    expect(fs.realpathSync(passed.entry)).toBe(
      fs.realpathSync(path.join(project, "node_modules", "multienv", "dist", "src", "index.js")),
    );

    fs.writeFileSync(stackFile, "config:\n  multienv:target: docker\n  multienv:captureTrafic: true\n");
    const failed = await checkOf();
    expect(failed.ok).toBe(false);
    expect(failed.problems.join("\n")).toContain("captureTrafic");
  }, 600_000);
});
