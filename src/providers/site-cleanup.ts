// `siteCleanup`: a live site's cleanup for the account its server signs in with, run when the env is destroyed and
// before the account's lease is released (its lease is deleted after the site's server, which is deleted after
// this), so the next task that leases the account starts clean. The cleanup is the site's own `reset` operation
// (its card's website/v1), called through the gateway while the server still runs with that account's settings, and
// only while the stack's lease still holds the account: first the lease is renewed under its own id (so it cannot
// expire and pass to another stack during the reset), and an account another holder took since (this lease expired)
// is theirs and not reset under them. A dynamic resource because it is the project's own step at destroy: no provider
// package has one. Create does nothing.
import { findExtension, parseCard, WEBSITE_OPERATIONS, WEBSITE_V1_URN } from "../protocol/card";
import type { GatewayPortForward } from "../protocol/port-forward";
import { openGatewayReach, type GatewayReach } from "../engines/gateway-reach";
import { GatewayClient } from "../protocol/gateway-client";
import { HOUR_MS, openLeaseStore, type StoreLocation } from "../accounts";
import { leaseLocation } from "./account-lease";
import { diffInputs, pick, type Operations } from "./operation";

const INPUT_KEYS = ["gatewayUrl", "controlToken", "site", "account", "gatewayPortForward", "lease"] as const;

/** The lease the cleanup is for: where it is kept and its own id (the AccountLease resource's state). */
export interface CleanupLease extends StoreLocation {
  pool: string;
  leaseId: string;
  leaseHours: number;
}

export interface SiteCleanupInputs {
  gatewayUrl: string;
  controlToken: string;
  site: string;
  /** The leased account the cleanup is for: a new account makes a new cleanup. */
  account: string;
  gatewayPortForward?: GatewayPortForward;
  /** The stack's lease of the account; absent in a state from before leases had ids (then it cleans regardless). */
  lease?: CleanupLease;
}

/**
 * Whether the lease still holds the account, renewing it for another `leaseHours` when it does, so it stays this
 * stack's while the reset runs (its release follows the cleanup).
 */
export async function stillHeld(lease: CleanupLease, account: string): Promise<boolean> {
  const store = await openLeaseStore(leaseLocation(lease));
  try {
    return (await store.renew(lease.pool, account, lease.leaseId, lease.leaseHours * HOUR_MS)) !== undefined;
  } finally {
    await store.close();
  }
}

/** POSTs the site's `reset` operation through the gateway; a site that declares none has nothing to clean. */
export async function cleanSite(inputs: SiteCleanupInputs): Promise<"reset" | "none"> {
  let reach: GatewayReach | undefined;
  try {
    reach = await openGatewayReach(inputs, { owner: `site ${inputs.site}` });
    const gateway = new GatewayClient(reach.url, inputs.controlToken);
    const raw = (await gateway.card("the gateway's card")).sites?.[inputs.site];
    const path = findExtension(raw ? parseCard(raw) : undefined, WEBSITE_V1_URN)?.paths?.[WEBSITE_OPERATIONS.reset];
    if (path === undefined) return "none";
    await gateway.siteOperation(`its reset operation (POST ${path})`, path);
    return "reset";
  } catch (error) {
    throw new Error(
      `site ${inputs.site}: the cleanup for account ${inputs.account} failed (${(error as Error).message}), so the account stays leased; once the site is clean, free it with \`multienv accounts <pool> --release ${inputs.account}\``,
      { cause: error },
    );
  } finally {
    await reach?.close();
  }
}

export const siteCleanup: Operations = {
  async diff(_id, olds, news) {
    return diffInputs(olds, news, INPUT_KEYS, { replaceOn: ["site", "account"] });
  },
  async create(inputs) {
    return { id: `${inputs.site}/${inputs.account}`, outs: pick(inputs, INPUT_KEYS) };
  },
  async update(_id, _olds, news) {
    return { outs: pick(news, INPUT_KEYS) };
  },
  async delete(_id, props) {
    const inputs = props as SiteCleanupInputs;
    // An account this stack no longer holds is another's to clean, if anyone's.
    if (inputs.lease !== undefined && !(await stillHeld(inputs.lease, inputs.account))) return;
    await cleanSite(inputs);
  },
};
