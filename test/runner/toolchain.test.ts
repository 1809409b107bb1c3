// A deploy provides the resource plugin its target needs: nothing when Pulumi's plugin directory has the version the
// project pins, a build through scripts/pulumi-toolchain.sh (saying what it builds and how long it takes, then the
// build's own lines) when it has not and Go is at hand. The script here is a stand-in that records how it was called.
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { builtToolchainDir, machineCacheDir, providePlugin } from "../../src/runner/stack/toolchain";
import { cleanup, tempDir } from "../helpers/processes";

afterAll(cleanup);

/** A project with @pulumi/kubernetes at `version` and a toolchain script that logs a line and records its arguments. */
function project(version: string): string {
  const dir = tempDir("toolchain-project-");
  mkdirSync(join(dir, "node_modules/@pulumi/kubernetes"), { recursive: true });
  writeFileSync(join(dir, "node_modules/@pulumi/kubernetes/package.json"), JSON.stringify({ version }));
  mkdirSync(join(dir, "scripts"));
  const script = join(dir, "scripts/pulumi-toolchain.sh");
  writeFileSync(script, `echo "$@" > "${join(dir, "called")}"\necho "[pulumi-kubernetes] building the provider" >&2\n`);
  chmodSync(script, 0o755);
  return dir;
}

/** A PATH with a `go` on it, and a PULUMI_HOME whose plugin directory holds what `installed` names. */
function machine(installed: string[] = []): NodeJS.ProcessEnv {
  const bin = tempDir("toolchain-bin-");
  writeFileSync(join(bin, "go"), "#!/bin/sh\n");
  chmodSync(join(bin, "go"), 0o755);
  const home = tempDir("toolchain-pulumi-home-");
  for (const plugin of installed) {
    mkdirSync(join(home, "plugins", plugin), { recursive: true });
    writeFileSync(join(home, "plugins", plugin, "pulumi-resource-kubernetes"), "");
  }
  return { PATH: `${bin}:/usr/bin:/bin`, PULUMI_HOME: home };
}

describe("providePlugin", () => {
  it("builds a missing plugin through the toolchain script, saying what it builds and how long, then its lines", async () => {
    const dir = project("4.24.1");
    const lines: string[] = [];
    await providePlugin("kubernetes", dir, (line) => lines.push(line), machine());
    expect(readFileSync(join(dir, "called"), "utf8").trim()).toBe("kubernetes");
    expect(lines[0]).toBe(
      "no kubernetes plugin 4.24.1 is installed: building it from its Go modules (about 11 minutes on 2 cores the " +
        "first time; `pulumi plugin install resource kubernetes 4.24.1` installs Pulumi's release instead)",
    );
    expect(lines).toContain("[pulumi-kubernetes] building the provider");
  });

  it("builds nothing when the pinned version is installed", async () => {
    const dir = project("4.24.1");
    await providePlugin("kubernetes", dir, () => undefined, machine(["resource-kubernetes-v4.24.1"]));
    expect(() => readFileSync(join(dir, "called"))).toThrow();
  });

  it("builds when only another version is installed (a version bump)", async () => {
    const dir = project("4.25.0");
    await providePlugin("kubernetes", dir, () => undefined, machine(["resource-kubernetes-v4.24.1"]));
    expect(readFileSync(join(dir, "called"), "utf8").trim()).toBe("kubernetes");
  });

  it("names one cache per machine, as the scripts do", () => {
    expect(machineCacheDir({ MULTIENV_CACHE: "/c" })).toBe("/c");
    expect(machineCacheDir({ XDG_CACHE_HOME: "/x" })).toBe("/x/multienv");
    expect(builtToolchainDir({ MULTIENV_CACHE: "/c" })).toBe("/c/pulumi/current");
  });
});
