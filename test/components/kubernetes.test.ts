// The kubernetes target under Pulumi's mocks: the real program on the demo-kubernetes stack, the graph it would
// register on a cluster, read for what a pod could do that it should not (host namespaces, capabilities, tokens in
// plain sight, a pod running before its walls), and for what the runner relies on (outputs, placement).
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readStackFile } from "../../src/config";
import { PROJECT_IMAGES } from "../../src/plan/images";
import { ENV_VARS } from "../../src/protocol/env";
import { CAPTURE_SERVER_ENV } from "../../src/protocol/gateway-config";
import type { Graph, GraphResource } from "../../src/runner/check/graph";
import { graphOf, recordDependencies } from "./helpers";

// @pulumi/kubernetes's type tokens, as the state holds them.
const POD = "kubernetes:core/v1:Pod";
const SERVICE = "kubernetes:core/v1:Service";
const SECRET_TYPE = "kubernetes:core/v1:Secret";
const NAMESPACE = "kubernetes:core/v1:Namespace";
const POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy";
const K8S_PROVIDER = "pulumi:providers:kubernetes";

const DEMO = readStackFile(path.join(__dirname, "../../stacks/Pulumi.demo-kubernetes.yaml"));
const STACK = DEMO.stack;
/** The demo stack's `multienv` keys as plain data (graphOf writes them back as Pulumi does). */
const DEMO_CONFIG: Record<string, any> = Object.fromEntries(
  Object.entries(DEMO.rawConfig)
    .filter(([key]) => key.startsWith("multienv:"))
    .map(([key, value]) => {
      try {
        return [key.slice("multienv:".length), JSON.parse(value)];
      } catch {
        return [key.slice("multienv:".length), value];
      }
    }),
);

const SECRET_VALUE = "ghp_not-a-real-token-0123456789";
const REGISTRY = "registry.example.com:5000/multienv";
const OWN_BROWSER = "example.org/own-browser:1";
const CLUSTER = {
  kubeconfig: "~/.kube/lab",
  context: "lab",
  imageRegistry: REGISTRY,
  runtimeClassName: "gvisor",
  nodeSelector: { "example.com/pool": "envs" },
  tolerations: [{ key: "dedicated", value: "envs", effect: "NoSchedule" }],
};
/** The demo with a secret setting, every key of the kubernetes section, and a computer with its own browser image. */
const FULL_CONFIG = {
  ...DEMO_CONFIG,
  kubernetes: CLUSTER,
  websites: {
    ...DEMO_CONFIG.websites,
    github: { ...DEMO_CONFIG.websites.github, secretSettings: { token: "githubToken" } },
  },
  computers: { ...DEMO_CONFIG.computers, open: { ...DEMO_CONFIG.computers.open, image: OWN_BROWSER } },
};

/** The demo with its computers, its sites and its gateway each placed on nodes of their own. */
const PLACED_CONFIG = {
  ...DEMO_CONFIG,
  kubernetes: {
    nodeSelector: { "example.com/pool": "envs" },
    tolerations: [{ key: "dedicated", operator: "Exists" }],
    placement: {
      computers: { nodeSelector: { "multienv.test/node": "a" } },
      sites: {
        nodeSelector: { "multienv.test/node": "b", "example.com/pool": "sites" },
        tolerations: [{ key: "sites", operator: "Exists", effect: "NoSchedule" }],
      },
      gateway: { nodeSelector: { "multienv.test/node": "b" } },
    },
  },
};

// The dependencies each registration names, read off the mock monitor while the graphs render.
const recorded = recordDependencies();
const dependencies = recorded.dependencies;

let demo: Graph;
let full: Graph;
let fullRevealed: Graph;
let uncaptured: Graph;
let placed: Graph;

beforeAll(async () => {
  demo = await graphOf(STACK, DEMO_CONFIG);
  full = await graphOf(STACK, FULL_CONFIG, { githubToken: SECRET_VALUE });
  fullRevealed = await graphOf(STACK, FULL_CONFIG, { githubToken: SECRET_VALUE }, true);
  uncaptured = await graphOf(STACK, { ...DEMO_CONFIG, captureTraffic: false });
  placed = await graphOf(STACK, PLACED_CONFIG);
});

afterAll(() => {
  recorded.stop();
});

const ofType = (graph: Graph, type: string) => graph.resources.filter((r) => r.type === type);
const specOf = (r: GraphResource) => (r.inputs as any).spec;
const nameOf = (r: GraphResource): string => (r.inputs as any).metadata.name;
const podNamed = (graph: Graph, name: string) => {
  const found = ofType(graph, POD).find((p) => nameOf(p) === name);
  if (found === undefined) throw new Error(`no pod ${name}; have ${ofType(graph, POD).map(nameOf).join(", ")}`);
  return found;
};
const allContainers = (pod: GraphResource): any[] => [
  ...(specOf(pod).initContainers ?? []),
  ...(specOf(pod).containers ?? []),
];
const isCapture = (c: any) => c.name === "capture";
const SITE_PODS = ["gist-server", "gist-frontend", "github-server", "shop-server", "shop-frontend"];
const COMPUTER_PODS = ["desktop-proxy", "desktop-browser", "open-proxy", "open-browser"];

/** Every string leaf of a value. */
function strings(value: unknown): string[] {
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.flatMap(strings);
  if (value !== null && typeof value === "object") return Object.values(value).flatMap(strings);
  return [];
}

describe("kubernetes target: pods", () => {
  it("places one pod per website container, the gateway, and each computer's proxy and browser, in the stack's namespace", () => {
    for (const graph of [demo, full]) {
      expect(ofType(graph, POD).map(nameOf).sort()).toEqual([...SITE_PODS, "gateway", ...COMPUTER_PODS].sort());
      for (const pod of ofType(graph, POD)) expect((pod.inputs as any).metadata.namespace).toBe(STACK);
      expect(ofType(graph, NAMESPACE).map(nameOf)).toEqual([STACK]);
      for (const r of graph.resources.filter((x) => x.type.startsWith("kubernetes:")))
        expect(r.provider, `${r.type} ${r.name}`).toBe(ofType(graph, K8S_PROVIDER)[0].name);
    }
  });

  it("runs each browser pod on a shared PID namespace, whose sandbox reaps what each reset's Chromium leaves, and no other pod", () => {
    for (const graph of [demo, full])
      for (const pod of ofType(graph, POD))
        expect({ pod: nameOf(pod), shared: specOf(pod).shareProcessNamespace === true }).toEqual({
          pod: nameOf(pod),
          shared: nameOf(pod).endsWith("-browser"),
        });
  });

  it("gives no pod a service account token, Service links, a host namespace, a host path or a privileged container", () => {
    for (const graph of [demo, full, uncaptured])
      for (const pod of ofType(graph, POD)) {
        const spec = specOf(pod);
        const name = nameOf(pod);
        expect(spec.automountServiceAccountToken, name).toBe(false);
        expect(spec.enableServiceLinks, name).toBe(false);
        for (const key of ["hostNetwork", "hostPID", "hostIPC", "hostUsers"])
          expect(spec[key] === undefined || spec[key] === (key === "hostUsers"), `${name} ${key}`).toBe(true);
        expect(spec.serviceAccountName ?? spec.serviceAccount, name).toBeUndefined();
        expect(spec.securityContext?.seccompProfile?.type, name).toBe("RuntimeDefault");
        for (const volume of spec.volumes ?? [])
          expect(Object.keys(volume).sort(), `${name} ${volume.name}`).toEqual(["emptyDir", "name"]);
        for (const c of allContainers(pod)) {
          expect(c.securityContext?.privileged, `${name}/${c.name}`).toBe(false);
          expect(c.securityContext?.allowPrivilegeEscalation, `${name}/${c.name}`).toBe(false);
          expect(c.ports?.some((p: any) => p.hostPort !== undefined) ?? false, `${name}/${c.name} hostPort`).toBe(
            false,
          );
        }
      }
  });

  it("drops every capability of every container; only the capture containers add NET_RAW and NET_ADMIN", () => {
    for (const graph of [demo, full, uncaptured])
      for (const pod of ofType(graph, POD))
        for (const c of allContainers(pod)) {
          const where = `${nameOf(pod)}/${c.name}`;
          expect(c.securityContext?.capabilities?.drop, where).toEqual(["ALL"]);
          const add: string[] = c.securityContext?.capabilities?.add ?? [];
          if (isCapture(c)) expect(add, where).toEqual(expect.arrayContaining(["NET_RAW", "NET_ADMIN"]));
          else
            expect(
              add.filter((cap) => cap !== "NET_BIND_SERVICE"),
              where,
            ).toEqual([]);
          // A site image may bind a port below 1024; none of the project's own containers needs even that.
          if (!SITE_PODS.includes(nameOf(pod)) || c.name === "capture-server")
            expect(add, where).not.toContain("NET_BIND_SERVICE");
        }
    const captures = ofType(demo, POD).flatMap(allContainers).filter(isCapture);
    expect(captures).toHaveLength(SITE_PODS.length);
    expect(ofType(uncaptured, POD).flatMap(allContainers).filter(isCapture)).toEqual([]);
  });

  it("runs each capture as native sidecars started before the site container: tcpdump, then its capture server", () => {
    for (const name of SITE_PODS) {
      const spec = specOf(podNamed(demo, name));
      const role = name.endsWith("-server") ? "server" : "frontend";
      expect(
        spec.initContainers.map((c: any) => c.name),
        name,
      ).toEqual(["capture", "capture-server"]);
      expect(
        spec.containers.map((c: any) => c.name),
        name,
      ).toEqual([role]);
      for (const c of spec.initContainers) expect(c.restartPolicy, `${name}/${c.name}`).toBe("Always");
      const [capture, server] = spec.initContainers;
      // The site container starts once the capture's first file is open (a startup probe gates the next container).
      expect(capture.startupProbe?.exec?.command?.join(" "), name).toContain(`/captures/${name}.pcap`);
      // Its capture server's connections are left out by the pod's own address (the downward API's) and 8090.
      expect(capture.command.at(-1), name).toBe("8090");
      expect(capture.env, name).toEqual([
        { name: "MULTIENV_POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
      ]);
      expect(capture.volumeMounts, name).toEqual([{ name: "captures", mountPath: "/captures" }]);
      expect(server.volumeMounts, name).toEqual([{ name: "captures", mountPath: "/captures", readOnly: true }]);
      expect(spec.containers[0].volumeMounts ?? [], `${name}'s own container mounts no capture`).toEqual([]);
      expect(JSON.parse(server.env.find((e: any) => e.name === CAPTURE_SERVER_ENV.config).value)).toEqual({
        listen: { host: name, port: 8090 },
        capturesDir: "/captures",
        container: name,
      });
    }
    for (const name of SITE_PODS) expect(specOf(podNamed(uncaptured, name)).initContainers, name).toBeUndefined();
  });

  // tcpdump (Debian bookworm's 4.99.3, the gateway image's) given `-Z root` calls initgroups() and setgid() before
  // it writes, which need CAP_SETGID: with ALL dropped and NET_RAW, NET_ADMIN alone it exits at once with
  // "Couldn't change to 'root' uid=0 gid=0: Operation not permitted" (reproduced with
  // `setpriv --bounding-set=-all,+net_raw,+net_admin tcpdump -i any -w x.pcap -Z root`; with +setgid it captures).
  // On Docker the sidecar keeps Docker's default capabilities, SETGID among them; here the capture never starts,
  // its startup probe never passes, and the site's container never runs.
  it("gives the capture container what its `tcpdump -Z root` needs to start (CAP_SETGID)", () => {
    for (const name of SITE_PODS) {
      const capture = specOf(podNamed(demo, name)).initContainers.find(isCapture);
      expect(capture.command.join(" ")).toContain("-Z root");
      expect(capture.securityContext.capabilities.add, name).toContain("SETGID");
    }
  });

  it("keeps every token and secret setting out of the pod specs: each is read from a Secret by reference", () => {
    const secretVars = new Set<string>([
      ENV_VARS.controlToken,
      ENV_VARS.siteProxyToken,
      ENV_VARS.websiteSettings,
      CAPTURE_SERVER_ENV.token,
    ]);
    const secrets = new Map(ofType(fullRevealed, SECRET_TYPE).map((s) => [nameOf(s), s]));
    const secretStrings = [...secrets.values()]
      .flatMap((s) => strings((s.inputs as any).stringData))
      .filter((v) => v.length >= 16 && !v.startsWith("{"));
    expect(secretStrings.length).toBeGreaterThan(SITE_PODS.length);
    const referenced: string[] = [];
    for (const pod of ofType(fullRevealed, POD))
      for (const c of allContainers(pod))
        for (const e of c.env ?? []) {
          const where = `${nameOf(pod)}/${c.name} ${e.name}`;
          if (secretVars.has(e.name)) {
            expect(e.value, where).toBeUndefined();
            const ref = e.valueFrom?.secretKeyRef;
            expect(ref, where).toBeDefined();
            const secret = secrets.get(ref.name);
            expect(secret, `${where}: Secret ${ref.name}`).toBeDefined();
            const data = (secret!.inputs as any).stringData;
            expect(Object.keys(data["[secret]"] ?? data), where).toContain(ref.key);
            referenced.push(e.name);
          }
          for (const s of [...secretStrings, SECRET_VALUE])
            expect(JSON.stringify(e.value ?? ""), `${where} holds a secret`).not.toContain(s);
        }
    // The control token on the gateway, a token on each proxy and capture server, the settings on each server.
    expect(referenced.filter((n) => n === ENV_VARS.controlToken)).toHaveLength(1);
    expect(referenced.filter((n) => n === ENV_VARS.siteProxyToken)).toHaveLength(2);
    expect(referenced.filter((n) => n === CAPTURE_SERVER_ENV.token)).toHaveLength(SITE_PODS.length);
    expect(referenced.filter((n) => n === ENV_VARS.websiteSettings)).toHaveLength(3);
    // The secret setting reached the github server's Secret (merged into its settings), and nowhere in plain sight.
    const github = (secrets.get("github-server-env")!.inputs as any).stringData["[secret]"];
    expect(JSON.parse(github.settings)).toEqual({ account: "alex", token: SECRET_VALUE });
    const plain = ofType(fullRevealed, POD).map((p) => JSON.stringify(p.inputs));
    for (const text of plain) expect(text).not.toContain(SECRET_VALUE);
  });

  it("marks every Secret's data secret, so it never reaches the state in plaintext", () => {
    for (const graph of [demo, full]) {
      const secrets = ofType(graph, SECRET_TYPE);
      expect(secrets.length).toBe(SITE_PODS.length + 1 + 2);
      for (const s of secrets) {
        const data = (s.inputs as any).stringData;
        expect(
          data === "[secret]" || strings(data).every((v) => v === "[secret]"),
          `${s.name}: ${JSON.stringify(data)}`,
        ).toBe(true);
        expect((s.inputs as any).data, s.name).toBeUndefined();
      }
    }
  });

  it("creates every pod after every NetworkPolicy and Service of the namespace, so no pod ever runs unwalled", () => {
    for (const graph of [demo, full]) {
      const policies = ofType(graph, POLICY).map((p) => p.urn);
      const services = ofType(graph, SERVICE).map((s) => s.urn);
      expect(policies.length).toBeGreaterThan(10);
      for (const pod of ofType(graph, POD)) {
        const deps = dependencies.get(pod.urn) ?? [];
        expect(deps.length, `${nameOf(pod)} dependencies recorded`).toBeGreaterThan(0);
        expect(deps, nameOf(pod)).toEqual(expect.arrayContaining([...policies, ...services]));
        expect(deps, nameOf(pod)).toContain(ofType(graph, NAMESPACE)[0].urn);
      }
      // The gateway after every website pod; a browser after its proxy.
      const gateway = dependencies.get(podNamed(graph, "gateway").urn) ?? [];
      expect(gateway).toEqual(expect.arrayContaining(SITE_PODS.map((n) => podNamed(graph, n).urn)));
      for (const c of ["desktop", "open"])
        expect(dependencies.get(podNamed(graph, `${c}-browser`).urn)).toContain(podNamed(graph, `${c}-proxy`).urn);
    }
  });

  it("maps each dialled name to the ClusterIP of the Service behind it (hostAliases)", () => {
    const aliases = (name: string) =>
      (specOf(podNamed(demo, name)).hostAliases as { hostnames: string[] }[]).flatMap((a) => a.hostnames).sort();
    expect(aliases("gateway")).toEqual([...SITE_PODS, "proxy-desktop", "proxy-open"].sort());
    expect(aliases("shop-frontend")).toEqual(["shop-server"]);
    expect(aliases("shop-server")).toEqual([]);
    expect(aliases("desktop-proxy")).toEqual(["browser", "gateway-desktop"]);
    expect(aliases("open-browser")).toEqual(["site-proxy"]);
  });
});

describe("kubernetes target: Services and policies", () => {
  it("puts a ClusterIP Service before each pod, never a NodePort, LoadBalancer or external address, selecting that pod alone", () => {
    for (const graph of [demo, full]) {
      const pods = ofType(graph, POD);
      for (const service of ofType(graph, SERVICE)) {
        const spec = specOf(service);
        expect(spec.type, nameOf(service)).toBe("ClusterIP");
        for (const key of ["externalIPs", "externalName", "loadBalancerIP", "nodePort"])
          expect(spec[key], `${nameOf(service)} ${key}`).toBeUndefined();
        for (const port of spec.ports) expect(port.nodePort, nameOf(service)).toBeUndefined();
        const selected = pods.filter((p) =>
          Object.entries(spec.selector).every(([k, v]) => (p.inputs as any).metadata.labels[k] === v),
        );
        expect(selected.map(nameOf), nameOf(service)).toEqual([nameOf(service)]);
      }
    }
  });

  it("exposes the gateway's browse port alone: its runner port 8080 is on no Service and no container port", () => {
    const service = ofType(demo, SERVICE).find((s) => nameOf(s) === "gateway")!;
    expect(specOf(service).ports.map((p: any) => p.port)).toEqual([8081]);
    for (const s of ofType(demo, SERVICE))
      expect(
        specOf(s).ports.some((p: any) => p.port === 8080 || p.targetPort === 8080),
        nameOf(s),
      ).toBe(false);
    const gateway = specOf(podNamed(demo, "gateway")).containers[0];
    expect(gateway.ports.map((p: any) => p.containerPort)).toEqual([8081]);
    expect(JSON.parse(gateway.env.find((e: any) => e.name === ENV_VARS.gatewayConfig).value).listen).toEqual({
      host: "127.0.0.1",
      port: 8080,
    });
  });

  it("declares the plan's NetworkPolicies in the namespace, default deny among them", () => {
    const policies = ofType(demo, POLICY);
    const deny = policies.find((p) => nameOf(p) === "default-deny");
    expect(specOf(deny!)).toEqual({ podSelector: {}, policyTypes: ["Ingress", "Egress"] });
    for (const p of policies) expect((p.inputs as any).metadata.namespace).toBe(STACK);
  });

  it("enforces the baseline pod security profile on the namespace when nothing captures, and then no pod asks for more", () => {
    expect((ofType(uncaptured, NAMESPACE)[0].inputs as any).metadata.labels).toEqual({
      "multienv.stack": STACK,
      "pod-security.kubernetes.io/enforce": "baseline",
    });
    expect((ofType(demo, NAMESPACE)[0].inputs as any).metadata.labels["multienv.stack"]).toBe(STACK);
  });
});

describe("kubernetes target: outputs and placement", () => {
  it("gives the runner the gateway as a pod to port-forward to, never an address", () => {
    expect(demo.outputs.gatewayUrl).toBe(`kubernetes://${STACK}/gateway:8080`);
    expect(demo.outputs.gatewayPortForward).toEqual({ namespace: STACK, pod: "gateway", port: 8080 });
    expect(full.outputs.gatewayUrl).toBe(`kubernetes://${STACK}/gateway:8080`);
    expect(full.outputs.gatewayPortForward).toEqual({
      namespace: STACK,
      pod: "gateway",
      port: 8080,
      kubeconfig: "~/.kube/lab",
      context: "lab",
    });
  });

  it("reaches the configured cluster: the provider takes the kubeconfig (home expanded) and context", () => {
    expect(ofType(demo, K8S_PROVIDER)[0].inputs).not.toHaveProperty("kubeconfig");
    expect(ofType(demo, K8S_PROVIDER)[0].inputs).not.toHaveProperty("context");
    expect(ofType(full, K8S_PROVIDER)[0].inputs).toMatchObject({
      kubeconfig: `${os.homedir()}/.kube/lab`,
      context: "lab",
    });
  });

  it("runs the project's images from the registry, pulled when absent, and a computer's own browser image in both its containers", () => {
    const image = (role: keyof typeof PROJECT_IMAGES) => `${REGISTRY}/${PROJECT_IMAGES[role].imageName}`;
    expect(specOf(podNamed(full, "gateway")).containers[0].image).toBe(image("gateway"));
    expect(specOf(podNamed(full, "desktop-proxy")).containers[0].image).toBe(image("site-proxy"));
    const desktop = specOf(podNamed(full, "desktop-browser"));
    expect([desktop.initContainers[0].image, desktop.containers[0].image]).toEqual([
      image("browser"),
      image("browser"),
    ]);
    const open = specOf(podNamed(full, "open-browser"));
    expect(open.initContainers.map((c: any) => c.image)).toEqual([OWN_BROWSER]);
    expect(open.containers.map((c: any) => c.image)).toEqual([OWN_BROWSER]);
    for (const c of specOf(podNamed(full, "shop-server")).initContainers) expect(c.image).toBe(image("gateway"));
    for (const pod of ofType(full, POD))
      for (const c of allContainers(pod)) expect(c.imagePullPolicy, `${nameOf(pod)}/${c.name}`).toBe("IfNotPresent");
    for (const pod of ofType(demo, POD))
      for (const c of allContainers(pod)) expect(c.imagePullPolicy, `${nameOf(pod)}/${c.name}`).toBe("Never");
    expect(specOf(podNamed(demo, "open-browser")).containers[0].image).toBe(PROJECT_IMAGES.browser.imageName);
  });

  it("puts every pod on the configured nodes with the configured tolerations, and the runtime class on computers' pods alone", () => {
    for (const pod of ofType(full, POD)) {
      const spec = specOf(pod);
      const name = nameOf(pod);
      expect(spec.nodeSelector, name).toEqual(CLUSTER.nodeSelector);
      expect(spec.tolerations, name).toEqual([{ ...CLUSTER.tolerations[0], operator: "Equal" }]);
      expect(spec.runtimeClassName, name).toBe(COMPUTER_PODS.includes(name) ? "gvisor" : undefined);
    }
    for (const pod of ofType(demo, POD)) {
      const spec = specOf(pod);
      for (const key of ["nodeSelector", "tolerations", "runtimeClassName"])
        expect(spec[key], `${nameOf(pod)} ${key}`).toBeUndefined();
    }
  });

  it("puts the computers, the sites and the gateway each where its placement says, over the target-wide one", () => {
    const where = (name: string) => {
      const spec = specOf(podNamed(placed, name));
      return { name, nodeSelector: spec.nodeSelector, tolerations: spec.tolerations };
    };
    const everywhere = { key: "dedicated", operator: "Exists" };
    for (const name of COMPUTER_PODS)
      expect(where(name)).toEqual({
        name,
        nodeSelector: { "example.com/pool": "envs", "multienv.test/node": "a" },
        tolerations: [everywhere],
      });
    // A key set in both takes the group's value: the sites' pool is theirs.
    for (const name of SITE_PODS)
      expect(where(name)).toEqual({
        name,
        nodeSelector: { "example.com/pool": "sites", "multienv.test/node": "b" },
        tolerations: [everywhere, { key: "sites", operator: "Exists", effect: "NoSchedule" }],
      });
    expect(where("gateway")).toEqual({
      name: "gateway",
      nodeSelector: { "example.com/pool": "envs", "multienv.test/node": "b" },
      tolerations: [everywhere],
    });
  });
});
