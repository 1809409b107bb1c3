// A person's takeover of a deployed computer, as `multienv watch` does it: the real watch server on loopback with the
// takeover's gateway, a viewer on its live channel, and the computer's agent on its own CDP connection (its agent
// token) through the gateway. Whatever the target, the env is reached by its gateway URL and control token alone.
import { WebSocket } from "ws";
import { bearer, computerAgentToken } from "../../../src/protocol/auth";
import { HAND_BACK_EVENT } from "../../../src/protocol/takeover";
import { takeoverGateway, type TakeoverRecord } from "../../../src/runner/operator/takeover";
import { computerFeed } from "../../../src/runner/operator/watch";
import { startWatchServer } from "../../../src/runner/operator/watch-server";
import { connectCdp } from "../../helpers/cdp";
import { until } from "../../helpers/until";
import { watchMessages } from "../../helpers/watch";

/** What a takeover saw: the agent's acting commands answered during it, what the person typed, the record kept. */
export interface TakeoverSeen {
  /** The agent's `Input.dispatchMouseEvent` and `Page.navigate` while the person held the computer: each answer. */
  refused: Array<{ method: string; error: { code: number; message: string } | undefined }>;
  /** The page's input field after the hand-back, as the agent reads it. */
  typed: string;
  /** The takeover's record at its hand-back. */
  record: TakeoverRecord;
}

/**
 * The agent opens a page that is one input field on its computer's tab on screen; a person (`operator`) takes the
 * computer over from watch's page, clicks the field and types `text`, and hands it back once the agent's acting
 * commands were answered. The agent's tab is sent back to the URL it showed before, so the env goes on as it was.
 */
export async function personTypesInTakeover(options: {
  stack: string;
  access: { gatewayUrl: string; controlToken: string };
  computer: string;
  operator: string;
  text: string;
}): Promise<TakeoverSeen> {
  const { stack, access, computer, operator, text } = options;
  let listed = "";
  const targets = await until(
    "the computer's tabs",
    async () => {
      const answer = await fetch(`${access.gatewayUrl}/computers/${computer}/cdp/json/list`, {
        headers: { Authorization: bearer(access.controlToken) },
      });
      listed = `${answer.status} ${await answer.text()}`;
      const list = answer.ok
        ? (JSON.parse(listed.slice(4)) as Array<{ type: string; url: string; webSocketDebuggerUrl: string }>)
        : [];
      return list.some((t) => t.type === "page") ? list : undefined;
    },
    120_000,
  ).catch((error: Error) => {
    throw new Error(`${error.message}: the gateway answered ${listed}`);
  });
  // The tab on screen (listed first), which the takeover's screen shows and takes input for.
  const onScreen = targets.find((t) => t.type === "page")!;
  const agent = await connectCdp(onScreen.webSocketDebuggerUrl, {
    Authorization: bearer(computerAgentToken(access.controlToken, computer)),
  });
  const records: TakeoverRecord[] = [];
  const server = await startWatchServer({
    stack,
    feeds: { [computer]: computerFeed(access, computer) },
    takeover: {
      gateway: takeoverGateway(access.gatewayUrl, access.controlToken),
      operator,
      onTakeover: (r) => void records.push(r),
    },
  });
  const viewer = new WebSocket(`${server.url.replace(/^http/, "ws")}live`, {
    origin: `http://127.0.0.1:${server.port}`,
  });
  const messages = watchMessages(viewer);
  const send = (message: unknown) => viewer.send(JSON.stringify(message));
  try {
    await agent.call("Page.navigate", {
      url: "data:text/html,<input id=q style='position:absolute;left:0;top:0;width:100%;height:100%'>",
    });
    await until("a frame of the page", () => messages.some((m) => m.type === "frame"), 60_000);
    send({ type: "take", computer });
    await until("the take", () => messages.some((m) => m.type === "takeover" && m.mine), 30_000);
    const refused: TakeoverSeen["refused"] = [];
    for (const [method, params] of [
      ["Input.dispatchMouseEvent", { type: "mouseMoved", x: 1, y: 1 }],
      ["Page.navigate", { url: "https://example.org/" }],
    ] as const)
      refused.push({ method, error: (await agent.send(method, params)).error });
    for (const action of ["down", "up"])
      send({
        type: "input",
        computer,
        input: { kind: "pointer", action, x: 0.5, y: 0.5, button: "left", clickCount: 1, modifiers: 0 },
      });
    for (const char of text) {
      send({ type: "input", computer, input: { kind: "key", action: "down", key: char, code: "", text: char } });
      send({ type: "input", computer, input: { kind: "key", action: "up", key: char, code: "" } });
    }
    const from = agent.events.length;
    // The person's inputs are done before the hand-back is asked for.
    send({ type: "handBack", computer });
    await agent.event(HAND_BACK_EVENT, from, 30_000);
    const value = await agent.call("Runtime.evaluate", {
      expression: "document.getElementById('q').value",
      returnByValue: true,
    });
    // The record is written at the take and at each renewal too; the hand-back's is the whole one.
    const record = await until("the record of the hand-back", () => records.find((r) => r.ended === "handed-back"));
    await agent.call("Page.navigate", { url: onScreen.url });
    return { refused, typed: (value.result as { value: string }).value, record };
  } finally {
    viewer.close();
    await server.close();
    agent.close();
  }
}
