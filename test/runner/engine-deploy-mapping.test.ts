// The e2e deploy's mapping from @pulumi/docker inputs to the Docker Engine API: what each input becomes,
// and that an input the table does not know stops the deploy with its name.
import { describe, expect, it } from "vitest";
import { containerSpec, durationNs, revealSecrets, UnmappedInputError } from "../../src/runner/engine-deploy";

const labels = { "multienv.stack": "t" };

describe("containerSpec", () => {
  it("maps the inputs the program uses to their Engine API fields", () => {
    const spec = containerSpec(
      "t-gateway",
      {
        name: "t-gateway",
        image: "multienv/gateway:latest",
        entrypoints: ["tcpdump"],
        command: ["-i", "any"],
        envs: ["A=1"],
        networksAdvanced: [
          { name: "t-env", aliases: ["t-gateway"] },
          { name: "t-ingress", aliases: [] },
        ],
        ports: [{ internal: 8080, ip: "127.0.0.1" }],
        mounts: [{ type: "volume", source: "t-captures", target: "/captures", readOnly: true }],
        capabilities: { adds: [], drops: ["NET_RAW"] },
        healthcheck: { tests: ["CMD", "true"], interval: "2s", timeout: "5s", retries: 30, startPeriod: "1m30s" },
        wait: true,
        waitTimeout: 120,
        restart: "unless-stopped",
        shmSize: 512,
        labels: [{ label: "multienv.role", value: "gateway" }],
      },
      labels,
    );
    expect(spec.name).toBe("t-gateway");
    expect(spec.create).toMatchObject({
      Image: "multienv/gateway:latest",
      Entrypoint: ["tcpdump"],
      Cmd: ["-i", "any"],
      Env: ["A=1"],
      ExposedPorts: { "8080/tcp": {} },
      Labels: { "multienv.role": "gateway", "multienv.stack": "t" },
      Healthcheck: { Test: ["CMD", "true"], Interval: 2e9, Timeout: 5e9, StartPeriod: 90e9, Retries: 30 },
      NetworkingConfig: { EndpointsConfig: { "t-env": { Aliases: ["t-gateway"] } } },
    });
    expect(spec.create.HostConfig).toMatchObject({
      NetworkMode: "t-env",
      PortBindings: { "8080/tcp": [{ HostIp: "127.0.0.1", HostPort: "" }] },
      Mounts: [{ Type: "volume", Source: "t-captures", Target: "/captures", ReadOnly: true }],
      CapAdd: [],
      CapDrop: ["NET_RAW"],
      RestartPolicy: { Name: "unless-stopped" },
      ShmSize: 512 * 1024 * 1024,
    });
    expect(spec.extraNetworks).toEqual([{ name: "t-ingress", aliases: [], ipv4Address: undefined, ipv6Address: undefined }]);
    expect(spec).toMatchObject({ wait: true, waitTimeoutSeconds: 120, start: true, mustRun: true });
  });

  it("keeps a shared network mode as given", () => {
    const spec = containerSpec("cap", { image: "x", networkMode: "container:abc123" }, labels);
    expect(spec.create.HostConfig.NetworkMode).toBe("container:abc123");
    expect(spec.create.NetworkingConfig).toBeUndefined();
  });

  it("fails loudly on an input it does not map, naming the resource and the input", () => {
    expect(() => containerSpec("t-x", { image: "x", gpus: "all" }, labels)).toThrow(UnmappedInputError);
    expect(() => containerSpec("t-x", { image: "x", gpus: "all" }, labels)).toThrow(/docker.Container t-x.gpus: not mapped/);
    expect(() => containerSpec("t-x", { image: "x", networksAdvanced: [{ name: "n", gwPriority: 1 }] }, labels)).toThrow(/networksAdvanced\[0\].gwPriority/);
    expect(() => containerSpec("t-x", { image: "x", rm: true }, labels)).toThrow(/rm: true is not supported/);
  });
});

describe("helpers", () => {
  it("reads Go durations", () => {
    expect(durationNs("500ms", "x")).toBe(5e8);
    expect(durationNs("1h2m", "x")).toBe(3720e9);
    expect(() => durationNs("2 seconds", "h.interval")).toThrow(/h.interval: "2 seconds" is not a duration/);
  });

  it("reveals secret-wrapped inputs", () => {
    const secret = { "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", value: "TOKEN=abc" };
    expect(revealSecrets({ envs: ["A=1", secret] })).toEqual({ envs: ["A=1", "TOKEN=abc"] });
  });
});
