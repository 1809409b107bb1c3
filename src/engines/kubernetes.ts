// Reaching the cluster of a stack on the kubernetes target, as kubectl reaches it: the kubeconfig file named (the
// stack's), else every file KUBECONFIG lists, merged (the first to set a value wins), else ~/.kube/config; the context
// named, else the kubeconfig's current one. Authentication (client certificates, tokens, exec plugins, auth
// providers) is @kubernetes/client-node's, as is every call to the API server. Each problem is one line naming the
// file or the context and how to fix it.
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, isAbsolute, join, resolve } from "node:path";
import type { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { errorMessage, RunnerError } from "../errors";

/**
 * @kubernetes/client-node, loaded when a cluster is first reached: a second of loading that a stack on Docker engines
 * never pays.
 */
export function clientNode(): typeof import("@kubernetes/client-node") {
  return require("@kubernetes/client-node") as typeof import("@kubernetes/client-node");
}

/** Which cluster, as the stack names it: unset parts are kubectl's defaults. */
export interface ClusterTarget {
  /** The kubeconfig file; unset: KUBECONFIG, else ~/.kube/config. */
  kubeconfig?: string;
  /** The context; unset: the kubeconfig's current context. */
  context?: string;
}

/** The kubeconfig files to read, and what chose them (for the errors). */
export interface KubeconfigFiles {
  files: string[];
  /** `the stack's kubeconfig`, `KUBECONFIG` or `the default ~/.kube/config`. */
  from: string;
}

/** `~/x` and relative paths as a shell would give them to kubectl. */
function expand(file: string, home: string, cwd: string): string {
  if (file === "~") return home;
  if (file.startsWith("~/")) return join(home, file.slice(2));
  return isAbsolute(file) ? file : resolve(cwd, file);
}

/**
 * The kubeconfig files kubectl would read: the one named, else KUBECONFIG's list (files that do not exist are
 * skipped, as kubectl skips them), else ~/.kube/config. Pure but for the existence checks.
 */
export function kubeconfigFiles(
  kubeconfig: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  home: string = env.HOME ?? homedir(),
  cwd: string = process.cwd(),
): KubeconfigFiles {
  if (kubeconfig !== undefined && kubeconfig !== "") {
    const file = expand(kubeconfig, home, cwd);
    if (!existsSync(file))
      throw new RunnerError(
        `kubeconfig ${file} (the stack's kubeconfig) does not exist; point the stack's kubeconfig at your cluster's file, or unset it to use KUBECONFIG or ~/.kube/config`,
      );
    return { files: [file], from: "the stack's kubeconfig" };
  }
  const listed = (env.KUBECONFIG ?? "").split(delimiter).filter((f) => f !== "");
  if (listed.length > 0) {
    const files = listed.map((f) => expand(f, home, cwd)).filter((f) => existsSync(f));
    if (files.length === 0)
      throw new RunnerError(
        `KUBECONFIG (${env.KUBECONFIG}) names no file that exists; set it to your cluster's kubeconfig file`,
      );
    return { files, from: "KUBECONFIG" };
  }
  const file = join(home, ".kube", "config");
  if (!existsSync(file))
    throw new RunnerError(
      `no kubeconfig: ${file} does not exist and KUBECONFIG is not set; set KUBECONFIG (or the stack's kubeconfig) to your cluster's kubeconfig file`,
    );
  return { files: [file], from: "the default ~/.kube/config" };
}

/** A loaded kubeconfig, its context chosen. */
export interface LoadedKubeConfig {
  config: KubeConfig;
  /** The files read, for errors. */
  files: string[];
  /** The context in use. */
  context: string;
}

function readFile(file: string): KubeConfig {
  const config = new (clientNode().KubeConfig)();
  try {
    config.loadFromFile(file);
  } catch (error) {
    throw new RunnerError(
      `kubeconfig ${file} could not be read: ${errorMessage(error).split("\n")[0]}; check it with \`kubectl --kubeconfig ${file} config view\``,
      { cause: error },
    );
  }
  return config;
}

/** Kubeconfigs merged as kubectl merges KUBECONFIG's list: for each name, and the current context, the first wins. */
export function mergeKubeConfigs(configs: KubeConfig[]): KubeConfig {
  const firstOf = <T extends { name: string }>(lists: T[][]): T[] => {
    const seen = new Map<string, T>();
    for (const item of lists.flat()) if (!seen.has(item.name)) seen.set(item.name, item);
    return [...seen.values()];
  };
  const merged = new (clientNode().KubeConfig)();
  merged.loadFromOptions({
    clusters: firstOf(configs.map((c) => c.getClusters())),
    users: firstOf(configs.map((c) => c.getUsers())),
    contexts: firstOf(configs.map((c) => c.getContexts())),
    currentContext: configs.map((c) => c.getCurrentContext()).find((name) => !!name) ?? "",
  });
  return merged;
}

/**
 * The kubeconfig of `target` loaded as kubectl loads it, its context set; a one-line RunnerError naming the file or
 * the context when it cannot be used.
 */
export function loadKubeConfig(target: ClusterTarget = {}, env: NodeJS.ProcessEnv = process.env): LoadedKubeConfig {
  const { files, from } = kubeconfigFiles(target.kubeconfig, env);
  const config = files.length === 1 ? readFile(files[0]) : mergeKubeConfigs(files.map(readFile));
  const where = files.length === 1 ? `kubeconfig ${files[0]}` : `the kubeconfigs of ${from} (${files.join(", ")})`;
  const names = config.getContexts().map((c) => c.name);
  const context = target.context || config.getCurrentContext();
  if (!context)
    throw new RunnerError(
      `${where} has no current context; choose one with \`kubectl config use-context <name>\` (its contexts: ${names.join(", ") || "none"}) or set the stack's context`,
    );
  if (!names.includes(context))
    throw new RunnerError(
      `${where} has no context ${context} (its contexts: ${names.join(", ") || "none"}); set the stack's context to one of them`,
    );
  config.setCurrentContext(context);
  const cluster = config.getCurrentCluster();
  if (cluster === null)
    throw new RunnerError(
      `${where}: context ${context} names a cluster the file does not define; fix it with \`kubectl config set-context ${context} --cluster <name>\``,
    );
  return { config, files, context };
}

/** The API server's status of a failed call (404 for an object that is not there), if it answered one. */
export function apiStatusOf(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === "number" ? code : undefined;
}

/** True when the API server said the object is not there. */
export function isNotFound(error: unknown): boolean {
  return apiStatusOf(error) === 404;
}

/** A failed API call in one line: the status message the API server gave, else the error's own first line. */
export function apiErrorText(error: unknown): string {
  const body = (error as { body?: unknown } | undefined)?.body;
  if (typeof body === "string") {
    try {
      const message = (JSON.parse(body) as { message?: unknown }).message;
      if (typeof message === "string") return message;
    } catch {
      // not a Status object
    }
  }
  return errorMessage(error).split("\n")[0];
}

/** The cluster's CoreV1 API (pods, namespaces) with the loaded kubeconfig's credentials. */
export function coreApi(loaded: LoadedKubeConfig): CoreV1Api {
  return loaded.config.makeApiClient(clientNode().CoreV1Api);
}
