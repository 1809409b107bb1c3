// When a deploy is done: the engine returns once the gateway is healthy, while a computer's browser may still be
// starting (its launcher waits for the env CA, then starts Chromium); with the self-test off nothing waits for it,
// and an agent's first connection got 503 (Chromium is not running). A deploy returns only once every computer's
// DevTools answers through the gateway.
import { gatewayClient } from "../../protocol/gateway-client";
import type { GatewayAccess } from "../stack/outputs";

/** How long a computer's browser has to answer DevTools once the deploy is done. */
export const BROWSERS_READY_MS = 120_000;
/** Answers in a row that count as ready, a quarter second apart: a browser about to restart answers once or twice. */
const ANSWERS_IN_A_ROW = 3;

/**
 * Resolves once each of `computers` answers DevTools' /json/version through the gateway; throws naming the first that
 * does not in time.
 */
export async function browsersAnswer(
  access: GatewayAccess,
  stack: string,
  computers: readonly string[],
  timeoutMs = BROWSERS_READY_MS,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const gateway = gatewayClient(access);
  await Promise.all(
    computers.map(async (computer) => {
      for (let answers = 0; answers < ANSWERS_IN_A_ROW;) {
        answers = (await gateway.devtoolsAnswers(computer, AbortSignal.timeout(5_000))) ? answers + 1 : 0;
        if (answers < ANSWERS_IN_A_ROW && Date.now() > deadline)
          throw new Error(
            `stack ${stack}: computer ${computer}'s browser did not answer DevTools through the gateway within ${timeoutMs / 1000} s of the deploy; \`multienv status ${stack}\` shows its containers`,
          );
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }),
  );
}
