// Where the Pulumi toolchain the project builds lives, and building a resource plugin a deploy needs when none is
// installed. scripts/pulumi-toolchain.sh does the building; this module only finds its results and starts it.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { machineCacheDir } from "../../machine-cache";

// The machine's cache (src/machine-cache.ts) holds the toolchain scripts/pulumi-toolchain.sh builds.
export { machineCacheDir } from "../../machine-cache";

/** The toolchain scripts/pulumi-toolchain.sh built last (`bin/pulumi` and the language host beside it). */
export function builtToolchainDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(machineCacheDir(env), "pulumi", "current");
}

/** The version of a provider package the project installed (`@pulumi/<name>`), which its plugin must match. */
function providerPackageVersion(projectDir: string, name: string): string | undefined {
  try {
    const manifest = JSON.parse(
      readFileSync(join(projectDir, "node_modules", "@pulumi", name, "package.json"), "utf8"),
    ) as { version?: string };
    return manifest.version;
  } catch {
    return undefined;
  }
}

/** True when Pulumi's plugin directory holds resource plugin `name` at `version` (as `pulumi plugin ls` lists). */
function pluginInstalled(name: string, version: string, env: NodeJS.ProcessEnv): boolean {
  const home = env.PULUMI_HOME || join(homedir(), ".pulumi");
  return existsSync(join(home, "plugins", `resource-${name}-v${version}`, `pulumi-resource-${name}`));
}

function goAvailable(env: NodeJS.ProcessEnv): boolean {
  const dirs = [...(env.PATH ?? "").split(":"), "/usr/local/go/bin"];
  return dirs.some((dir) => dir !== "" && existsSync(join(dir, "go")));
}

/**
 * Provides the resource plugin of provider package `name` before a deploy that needs it: nothing when a plugin of
 * the package's version is installed, or when Go is not at hand (Pulumi then installs its release itself, as for
 * any project); otherwise scripts/pulumi-toolchain.sh builds it from its Go modules, which takes minutes the first
 * time, so `log` is told what is built and how long it takes, and then the script's progress lines.
 */
export async function providePlugin(
  name: "docker" | "kubernetes",
  projectDir: string,
  log: (line: string) => void,
  env: NodeJS.ProcessEnv = process.env,
): Promise<void> {
  const version = providerPackageVersion(projectDir, name);
  const script = join(projectDir, "scripts", "pulumi-toolchain.sh");
  if (!version || pluginInstalled(name, version, env) || !goAvailable(env) || !existsSync(script)) return;
  const time = name === "kubernetes" ? "about 11 minutes" : "about 6 minutes";
  log(
    `no ${name} plugin ${version} is installed: building it from its Go modules (${time} on 2 cores the first time; ` +
      `\`pulumi plugin install resource ${name} ${version}\` installs Pulumi's release instead)`,
  );
  await new Promise<void>((resolve, reject) => {
    const child = spawn("bash", [script, name], { cwd: projectDir, env, stdio: ["ignore", "ignore", "pipe"] });
    let tail = "";
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk: string) => {
      tail = (tail + chunk).slice(-4000);
      for (const line of chunk.split("\n")) if (line.trim() !== "") log(line);
    });
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0
        ? resolve()
        : reject(
            new Error(
              `building the ${name} plugin failed (bash scripts/pulumi-toolchain.sh ${name}): ${tail.trim().split("\n").pop() ?? ""}`,
            ),
          ),
    );
  });
}
