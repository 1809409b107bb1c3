// GET /healthz on a capture server: whether its container's capture is writing, by the gateway's rule
// (src/gateway/capture-health.ts), "grew" meaning: changed since the previous /healthz. The gateway looks once
// before it makes traffic in the container and again after, so the second look sees the probes' packets.
import type { CaptureServerHealth } from "../protocol/traffic";
import { parseCaptureContainer } from "../protocol/traffic";
import { captureProblem, newestCaptures, type CaptureState, type ExpectedCapture } from "../service-kit/capture-health";

export class CaptureHealth {
  private readonly expected: ExpectedCapture;
  /** The newest file at the previous look (undefined: none yet, or no file then). */
  private last: CaptureState | undefined;

  constructor(
    private readonly dir: string,
    private readonly container: string,
    private readonly freshMs: number,
  ) {
    this.expected = parseCaptureContainer(container)!;
  }

  async check(): Promise<CaptureServerHealth> {
    const [now] = await newestCaptures(this.dir, [this.expected]);
    const problem = await captureProblem(this.dir, now, this.last, this.expected, this.freshMs);
    this.last = now;
    return problem === undefined
      ? { ok: true, container: this.container }
      : { ok: false, container: this.container, problem };
  }
}
