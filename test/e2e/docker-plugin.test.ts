// The docker plugin the engine runs (installed by the user, or built by scripts/pulumi-toolchain.sh) serves the
// package the program is written against: @pulumi/docker's tokens, and for every resource and type the program
// uses, the same property names its npm types declare, in and out. A plugin bridged with other tokens or names
// would deploy nothing the program declares, or drop a property silently.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { RESOURCE_TYPES } from "../../src/protocol/resource-types";
import { REPO } from "./helpers/env";

const NPM = path.join(REPO, "node_modules/@pulumi/docker");
const VERSION = (JSON.parse(fs.readFileSync(path.join(NPM, "package.json"), "utf8")) as { version: string }).version;

interface Schema {
  version?: string;
  config: { variables: Record<string, unknown> };
  resources: Record<string, { inputProperties: Record<string, unknown>; properties: Record<string, unknown> }>;
  types: Record<string, { properties: Record<string, unknown> }>;
}

/** The member names of each interface declared in a .d.ts file of the npm package. */
function interfaces(file: string): Map<string, Set<string>> {
  const source = ts.createSourceFile(file, fs.readFileSync(path.join(NPM, file), "utf8"), ts.ScriptTarget.Latest);
  const found = new Map<string, Set<string>>();
  const visit = (node: ts.Node) => {
    if (ts.isInterfaceDeclaration(node))
      found.set(
        node.name.text,
        new Set(node.members.flatMap((m) => (m.name && ts.isIdentifier(m.name) ? [m.name.text] : []))),
      );
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const schema = JSON.parse(
  execFileSync("pulumi", ["package", "get-schema", `docker@${VERSION}`], { encoding: "utf8", cwd: REPO }),
) as Schema;

describe(`the installed docker plugin ${VERSION}`, () => {
  it("is the version of the @pulumi/docker package the lock file pins", () => {
    expect(schema.version).toBe(VERSION);
  });

  it.each([
    [RESOURCE_TYPES.container, "container.d.ts", "Container"],
    [RESOURCE_TYPES.network, "network.d.ts", "Network"],
    [RESOURCE_TYPES.volume, "volume.d.ts", "Volume"],
    [RESOURCE_TYPES.image, "remoteImage.d.ts", "RemoteImage"],
  ])("serves %s with the inputs and outputs @pulumi/docker declares", (token, file, name) => {
    const resource = schema.resources[token];
    expect(resource, `${token} in the plugin's schema`).toBeDefined();
    const declared = interfaces(file);
    expect(new Set(Object.keys(resource.inputProperties))).toEqual(declared.get(`${name}Args`));
    expect(new Set(Object.keys(resource.properties))).toEqual(declared.get(`${name}State`));
  });

  it("takes the provider config @pulumi/docker sends (host, sshOpts and the rest)", () => {
    const declared = interfaces("provider.d.ts").get("ProviderArgs")!;
    expect(new Set(Object.keys(schema.config.variables))).toEqual(declared);
  });

  it.each([
    "ContainerNetworksAdvanced",
    "ContainerHealthcheck",
    "ContainerPort",
    "ContainerMount",
    "ContainerCapabilities",
    "ContainerLabel",
    "ContainerNetworkData",
    "NetworkIpamConfig",
    "RemoteImageBuild",
  ])("names the fields of %s as @pulumi/docker does", (type) => {
    const token = Object.keys(schema.types).find((t) => t.endsWith(`:${type}`));
    expect(token, `${type} in the plugin's schema`).toBeDefined();
    const names = new Set([
      ...(interfaces("types/input.d.ts").get(type) ?? []),
      ...(interfaces("types/output.d.ts").get(type) ?? []),
    ]);
    expect(new Set(Object.keys(schema.types[token!].properties))).toEqual(names);
  });
});
