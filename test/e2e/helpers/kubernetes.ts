// The two-node test cluster of the e2e tier (scripts/test-cluster.sh) and what the tests do in it with kubectl:
// exec in a pod's container, read a pod or a Service, stand in for the public web. kubectl is the cluster's own
// client, built with it; the tests speak to the cluster as an operator would.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { until } from "../../helpers/until";
import { REPO } from "./env";
import { makeStandinCerts, STANDIN_HOSTS, type StandinCerts } from "./web-standin";

/** What `scripts/test-cluster.sh env` prints, once the cluster is up. */
export interface TestCluster {
  kubeconfig: string;
  kubectl: string;
  /** The network namespace standing in for the public web, and its (public) address. */
  webNetns: string;
  webAddress: string;
  /** The cluster DNS's hosts file: `<address> <name>...` lines. */
  dnsHosts: string;
  /** Each node's containerd socket (node a's first), for what the API no longer shows. */
  containerdSockets: string[];
}

const SCRIPT = path.join(REPO, "scripts/test-cluster.sh");

/** How long a kubernetes file's setup may wait for its prerequisites to build on a new machine. */
export const PREREQUISITES_TIMEOUT_MS = 50 * 60_000;

/**
 * Brings the test cluster up and reads its env, once the kubernetes plugin and the cluster's binaries are built:
 * seconds on a machine that built them once; on a new one, minutes, waiting for the build the e2e run started in
 * the background (global-setup.ts), whose progress lines it prints.
 */
export function testCluster(): TestCluster {
  execFileSync("bash", [path.join(REPO, "scripts/kubernetes-prereqs.sh")], {
    stdio: ["ignore", "ignore", "inherit"],
    timeout: PREREQUISITES_TIMEOUT_MS,
  });
  execFileSync("bash", [SCRIPT, "up"], { stdio: ["ignore", "ignore", "inherit"], timeout: 600_000 });
  const exports = Object.fromEntries(
    execFileSync("bash", [SCRIPT, "env"], { encoding: "utf8" })
      .split("\n")
      .flatMap((line) => {
        const m = /^export ([A-Z_]+)=(.*)$/.exec(line.trim());
        return m ? [[m[1], m[2].replace(/^['"]|['"]$/g, "")]] : [];
      }),
  ) as Record<string, string>;
  const need = (key: string) => {
    const value = exports[key];
    if (!value) throw new Error(`scripts/test-cluster.sh env printed no ${key}`);
    return value;
  };
  return {
    kubeconfig: need("KUBECONFIG"),
    kubectl: exports.MULTIENV_TEST_KUBECTL ?? "kubectl",
    webNetns: need("MULTIENV_TEST_WEB_NETNS"),
    webAddress: need("MULTIENV_TEST_WEB_ADDRESS"),
    dnsHosts: need("MULTIENV_TEST_DNS_HOSTS"),
    containerdSockets: need("MULTIENV_TEST_CONTAINERD_SOCKETS").split(" "),
  };
}

/** kubectl against the test cluster; its stdout. */
export function kubectl(cluster: TestCluster, args: string[], input?: string): string {
  return execFileSync(cluster.kubectl, ["--kubeconfig", cluster.kubeconfig, ...args], {
    input,
    encoding: "utf8",
    stdio: ["pipe", "pipe", "pipe"],
    timeout: 60_000,
  });
}

/**
 * Waits (2 minutes at most) until the API server no longer has `namespace`, as after a stack's `down`: asked with
 * kubectl, from outside the runner, whose own wait (namespaceGone in its kubernetes target) is what is under test.
 */
export async function namespaceGone(cluster: TestCluster, namespace: string): Promise<void> {
  await until(
    `namespace ${namespace} gone`,
    async () => {
      try {
        kubectl(cluster, ["get", "namespace", namespace]);
        return false;
      } catch {
        return true;
      }
    },
    120_000,
    250,
  );
}

/**
 * Loses a node of the test cluster as a node is lost when its kubelet dies (`scripts/test-cluster.sh node <letter>
 * stop`: its containerd and pods' containers go on), or starts its kubelet again and waits until it is Ready.
 */
export function nodeKubelet(letter: "a" | "b", action: "stop" | "start"): void {
  execFileSync("bash", [SCRIPT, "node", letter, action], { stdio: ["ignore", "ignore", "inherit"], timeout: 300_000 });
}

/** The Ready condition's status of a node (`True`, `False`, `Unknown`), asked with kubectl. */
export function nodeReady(cluster: TestCluster, node: string): string {
  return kubectl(cluster, ["get", "node", node, "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status}']);
}

/** `kubectl get -o json` of one object, parsed. */
export function getJson(cluster: TestCluster, namespace: string, kind: string, name: string): any {
  return JSON.parse(kubectl(cluster, ["get", "-n", namespace, kind, name, "-o", "json"]));
}

/** Runs a command in a container of a pod; its stdout. */
export function execIn(
  cluster: TestCluster,
  namespace: string,
  pod: string,
  container: string,
  args: string[],
  input?: string,
): string {
  return kubectl(cluster, ["exec", "-i", "-n", namespace, pod, "-c", container, "--", ...args], input);
}

/** A node script run in a container of a pod (every multienv image has node); its stdout. */
export function nodeInPod(cluster: TestCluster, namespace: string, pod: string, container: string, script: string) {
  return execIn(cluster, namespace, pod, container, ["node", "-e", script]);
}

/** The stand-in for the public web: the e2e web stand-in in the cluster's web namespace, its names in the DNS. */
export interface ClusterWebStandin {
  certs: StandinCerts;
  stop(): void;
}

/**
 * Starts the web stand-in (test/e2e/fixtures/web-standin.cjs) in the cluster's web network namespace, on its public
 * address, and maps STANDIN_HOSTS (and `extra`) to it in the cluster's DNS, as the real names resolve on the web.
 */
export async function startClusterStandin(cluster: TestCluster, extra: string[] = []): Promise<ClusterWebStandin> {
  const certs = makeStandinCerts();
  const child: ChildProcess = spawn(
    "ip",
    ["netns", "exec", cluster.webNetns, process.execPath, path.join(REPO, "test/e2e/fixtures/web-standin.cjs")],
    {
      env: {
        ...process.env,
        STANDIN_CERT: path.join(certs.dir, "cert.pem"),
        STANDIN_KEY: path.join(certs.dir, "key.pem"),
      },
      stdio: ["ignore", "ignore", "inherit"],
    },
  );
  const names = [...STANDIN_HOSTS, ...extra];
  const before = fs.existsSync(cluster.dnsHosts) ? fs.readFileSync(cluster.dnsHosts, "utf8") : "";
  fs.writeFileSync(cluster.dnsHosts, `${before}${cluster.webAddress} ${names.join(" ")}\n`);
  // The stand-in listens once node has started: wait for its HTTPS port from the web namespace itself.
  for (let i = 0; i < 100; i++) {
    try {
      execFileSync("ip", ["netns", "exec", cluster.webNetns, "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/443"], {
        stdio: "ignore",
      });
      break;
    } catch {
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    certs,
    stop() {
      child.kill();
      fs.writeFileSync(cluster.dnsHosts, before);
      fs.rmSync(certs.dir, { recursive: true, force: true });
    },
  };
}
