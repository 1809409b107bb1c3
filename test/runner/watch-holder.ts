// A `watch` that takes a computer over and holds it, as `multienv takeover` does, for a test to kill: the real watch
// server, its takeover taken at start, its records written to run.json. Reads WATCH_HOLDER (JSON: gatewayUrl,
// controlToken, computer, stack, artifactsDir, holdSeconds) and prints {"event":"held", record} once the take's record
// is written.
import { recordTakeover } from "../../src/runner/evidence/takeovers";
import { takeoverGateway } from "../../src/runner/operator/takeover";
import { computerFeed } from "../../src/runner/operator/watch";
import { startWatchServer } from "../../src/runner/operator/watch-server";

const { gatewayUrl, controlToken, computer, stack, artifactsDir, holdSeconds } = JSON.parse(
  process.env.WATCH_HOLDER ?? "{}",
) as Record<string, string> & { holdSeconds: number };

void startWatchServer({
  stack,
  feeds: { [computer]: computerFeed({ gatewayUrl, controlToken }, computer) },
  takeover: {
    gateway: takeoverGateway(gatewayUrl, controlToken),
    operator: "holder",
    holdSeconds,
    onTakeover: (record) => recordTakeover(artifactsDir, stack, record),
  },
  takeNow: computer,
}).then(
  () => process.stdout.write(`${JSON.stringify({ event: "held" })}\n`),
  (error: unknown) => {
    process.stderr.write(`${String(error)}\n`);
    process.exit(1);
  },
);
