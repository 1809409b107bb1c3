// Whether a website container's capture is writing: the rule /healthz applies, on the gateway (its captures
// folder) and on each capture server (its pod's), read from the files alone.
//
// "Writing" means: the newest `<site>-<role>.pcap<N>` file holds at least a pcap header (tcpdump -U writes it as
// soon as it opens the file, so this proves the capture started) and it was modified within the freshness window or
// it grew since the state it is compared with (another file, or another size).
import type { CaptureRole } from "../protocol/traffic";
import { listCaptures, openCapture } from "./captures";

const PCAP_HEADER_BYTES = 24;
const PCAP_MAGICS = new Set([0xa1b2c3d4, 0xd4c3b2a1, 0xa1b23c4d, 0x4d3cb2a1]);

/** A container's newest capture file as last seen. */
export interface CaptureState {
  name: string;
  bytes: number;
  mtimeMs: number;
}

export interface ExpectedCapture {
  site: string;
  role: CaptureRole;
}

async function readMagic(dir: string, name: string): Promise<number | undefined> {
  const opened = await openCapture(dir, name);
  if (!opened) return undefined;
  const { handle } = opened;
  try {
    const { bytesRead, buffer } = await handle.read(Buffer.alloc(4), 0, 4, 0);
    return bytesRead === 4 ? buffer.readUInt32BE(0) : undefined;
  } finally {
    await handle.close();
  }
}

/** The newest file of each expected capture in `dir` (undefined when there is none). */
export async function newestCaptures(
  dir: string,
  expected: readonly ExpectedCapture[],
): Promise<Array<CaptureState | undefined>> {
  const all = await listCaptures(dir).catch(() => []); // oldest first
  return expected.map(({ site, role }) => {
    const newest = all.filter((capture) => capture.site === site && capture.role === role).at(-1);
    return newest && { name: newest.name, bytes: newest.bytes, mtimeMs: Date.parse(newest.modified) };
  });
}

/**
 * Why the capture of `site`-`role` is not writing (one line), or undefined when it is: `state` is its newest file
 * now, `before` what it was at the last look (undefined: none).
 */
export async function captureProblem(
  dir: string,
  state: CaptureState | undefined,
  before: CaptureState | undefined,
  { site, role }: ExpectedCapture,
  freshMs: number,
): Promise<string | undefined> {
  if (!state) return `no ${site}-${role}.pcap<N> file in the captures folder`;
  if (state.bytes < PCAP_HEADER_BYTES) return `${state.name} has no pcap header yet`;
  const magic = await readMagic(dir, state.name).catch(() => undefined);
  if (magic === undefined || !PCAP_MAGICS.has(magic)) return `${state.name} is not a pcap file`;
  const grew = before !== undefined && (before.name !== state.name || before.bytes !== state.bytes);
  if (grew || Date.now() - state.mtimeMs <= freshMs) return undefined;
  return `${state.name} unchanged since ${new Date(state.mtimeMs).toISOString()}, even after traffic to its container`;
}
