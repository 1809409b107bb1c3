// A stack's namespaces on the kubernetes target: the one the program creates (the stack's name, labelled
// multienv.stack=<stack>), which `down` checks is gone after the destroy, and any a stack left behind (labelled, of a
// stack the state no longer has), which can be listed and deleted.
import type { CoreV1Api } from "@kubernetes/client-node";
import { LABELS } from "../../../protocol/labels";
import { RunnerError } from "../../errors";
import { apiErrorText, isNotFound } from "../../../engines/kubernetes";
import type { WaitOptions } from "./pods";

/** A namespace labelled with a stack. */
export interface StackNamespace {
  name: string;
  stack: string;
  /** `Active` or `Terminating`. */
  phase: string;
  created?: string;
}

/** Every namespace of the cluster labelled multienv.stack. */
export async function labelledNamespaces(core: CoreV1Api): Promise<StackNamespace[]> {
  const list = await core.listNamespace({ labelSelector: LABELS.stack });
  return list.items.map((ns) => ({
    name: ns.metadata?.name ?? "",
    stack: ns.metadata?.labels?.[LABELS.stack] ?? "",
    phase: ns.status?.phase ?? "Active",
    ...(ns.metadata?.creationTimestamp ? { created: new Date(ns.metadata.creationTimestamp).toISOString() } : {}),
  }));
}

/** Deletes a namespace (everything in it goes with it); one already gone is no error. */
export async function deleteNamespace(core: CoreV1Api, name: string): Promise<void> {
  await core.deleteNamespace({ name }).catch((error: unknown) => {
    if (!isNotFound(error))
      throw new RunnerError(`namespace ${name} could not be deleted: ${apiErrorText(error)}`, { cause: error });
  });
}

/**
 * Waits until the namespace is gone; its phase (`Terminating`) when it is still there at the timeout, undefined once
 * gone.
 */
export async function namespaceGone(
  core: CoreV1Api,
  name: string,
  options: WaitOptions = {},
): Promise<string | undefined> {
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  for (;;) {
    let phase: string;
    try {
      phase = (await core.readNamespace({ name })).status?.phase ?? "Active";
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
    if (Date.now() > deadline) return phase;
    await new Promise((done) => setTimeout(done, options.pollMs ?? 500));
  }
}
