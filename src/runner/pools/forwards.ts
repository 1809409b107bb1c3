// How a claim's computers are reached. On docker a member's cdpUrl is dialable as it is; on the kubernetes target it
// names the gateway's pod (kubernetes://), and a claim hands it out on the local end of a port-forward of the claiming
// process: one per member, opened at its first claim and kept while the process runs (serve's for as long as it
// serves), so later claims of the member pay nothing for it. A port-forward opens a stream per connection through the
// API server, so a member whose pods are recreated by a reset is reached again by the same forward.
import { openGatewayReach, type GatewayReach } from "../../engines/gateway-reach";
import { rebaseUrl } from "../stack/outputs";
import type { ComputerHandle, MemberHandles } from "./pool";

export class MemberForwards {
  private readonly open = new Map<string, Promise<GatewayReach>>();

  constructor(private readonly env?: NodeJS.ProcessEnv) {}

  /** The member's computers as a client of this process dials them. */
  async computersOf(handles: MemberHandles): Promise<Record<string, ComputerHandle>> {
    const { portForward, gatewayUrl } = handles;
    if (portForward === undefined || gatewayUrl === undefined) return handles.computers;
    let forward = this.open.get(handles.stack);
    if (forward === undefined) {
      forward = openGatewayReach(
        { gatewayUrl, gatewayPortForward: portForward },
        { owner: `pool member ${handles.stack}`, env: this.env },
      );
      this.open.set(handles.stack, forward);
      // A forward that failed to open is tried again at the next claim.
      forward.catch(() => this.open.delete(handles.stack));
    }
    const local = (await forward).url;
    return Object.fromEntries(
      Object.entries(handles.computers).map(([name, computer]) => [
        name,
        { ...computer, cdpUrl: rebaseUrl(computer.cdpUrl, gatewayUrl, local) },
      ]),
    );
  }

  /** Closes the member's forward (it was destroyed or replaced). */
  async close(member: string): Promise<void> {
    const forward = this.open.get(member);
    this.open.delete(member);
    await forward?.then((f) => f.close()).catch(() => undefined);
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.open.keys()].map((member) => this.close(member)));
  }
}

/** The forwards of a process that claims through the library without serve: they last as long as the process. */
export const processForwards = new MemberForwards();
