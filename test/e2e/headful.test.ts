// A headful computer on the real engine: it deploys with Chromium on a display of Xvfb in its container (no
// --headless), passes its self-test, and its agent sees a desktop browser's user agent. A person takes it over from
// `watch` (the watch server's live channel, as the page uses it) and signs in on the synthetic shop with clicks and
// keys; the agent's input and navigation meanwhile are refused with the takeover named, and work again after the
// hand-back event. The evidence: run.json's takeover, and the HAR's sign-in marked the person's, with the typed
// password in no log.
import fs from "node:fs";
import path from "node:path";
import type { Har } from "har-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { computerAgentToken } from "../../src/protocol/auth";
import type { RequestLogEntry } from "../../src/protocol/request-log";
import { HAND_BACK_EVENT, TAKEN_OVER_ERROR_CODE } from "../../src/protocol/takeover";
import { collectCaptures, deployStack, watchStack, type StackSpec } from "../../src/runner";
import type { WatchServer } from "../../src/runner/operator/watch-server";
import { connectCdp, type CdpClient } from "../helpers/cdp";
import { until } from "../helpers/until";
import { watchMessages } from "../helpers/watch";
import { CHROMIUM_MAIN, deployEnv, e2eStack, REPO, type DeployedEnv, SAMPLE_SHOP } from "./helpers/env";

const STACK = e2eStack("e2e-headful");
const ARTIFACTS = path.join(REPO, "artifacts", STACK);
const COMPUTER = "desk";
const BROWSER = `${STACK}-${COMPUTER}-browser`;
/** Typed by the person into the shop's password field: not the demo account's, so nothing on a page shows it. */
const PASSWORD = `typed-by-person-${process.pid}`;
const SPEC: StackSpec = {
  name: STACK,
  config: {
    target: "docker",
    websites: {
      shop: SAMPLE_SHOP,
    },
    computers: { [COMPUTER]: { network: "none", startTabs: ["https://shop.test/"], headful: true } },
  },
};

let env: DeployedEnv;
let agent: CdpClient;
let watch: WatchServer | undefined;

/** The agent's own DevTools connection to the computer's tab, through the gateway with its agent token. */
async function connectAgent(): Promise<CdpClient> {
  const tabs = (await (await env.gateway(`/computers/${COMPUTER}/cdp/json/list`)).json()) as {
    type: string;
    webSocketDebuggerUrl: string;
  }[];
  return connectCdp(tabs.find((t) => t.type === "page")!.webSocketDebuggerUrl, {
    Authorization: `Bearer ${computerAgentToken(env.token, COMPUTER)}`,
  });
}

async function evaluate(expression: string): Promise<unknown> {
  const { result } = await agent.call("Runtime.evaluate", { expression, returnByValue: true });
  return (result as { value: unknown }).value;
}

/** Every file under `dir`, recursively. */
function filesUnder(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? filesUnder(path.join(dir, e.name)) : [path.join(dir, e.name)]));
}

beforeAll(async () => {
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
  env = await deployEnv(STACK, { spec: SPEC, standin: false });
  // The self-test (the first deploy skips it): it needs nothing outside.
  env.outputs = (await deployStack(SPEC)).outputs;
  agent = await connectAgent();
}, 480_000);

afterAll(async () => {
  agent?.close();
  await watch?.close().catch(() => undefined);
  await env?.teardown();
  fs.rmSync(ARTIFACTS, { recursive: true, force: true });
}, 180_000);

describe("a headful computer", () => {
  it("runs Chromium on a display of Xvfb, not headless, passes its self-test, and shows a desktop user agent", async () => {
    const selfTest = env.outputs.selfTest;
    expect("passed" in selfTest && selfTest.passed, JSON.stringify(selfTest)).toBe(true);
    expect(env.pidsIn(BROWSER, /^Xvfb /)).toHaveLength(1);
    // Two Chromiums on the display: the one in use and the standby a reset will promote, its window off-screen.
    await until("the Chromium in use and its standby", () => env.pidsIn(BROWSER, CHROMIUM_MAIN).length === 2, 60_000);
    expect(env.pidsIn(BROWSER, /^\/usr\/lib\/chromium\/chromium (?!.*--type=).*--headless/)).toEqual([]);
    const userAgent = String(await evaluate("navigator.userAgent"));
    expect(userAgent).toMatch(/Chrome\/\d+/);
    expect(userAgent).not.toContain("HeadlessChrome");
    // Screenshots are of the page as drawn on the display.
    const shot = Buffer.from(String((await agent.call("Page.captureScreenshot", { format: "png" })).data), "base64");
    expect(shot.subarray(1, 4).toString()).toBe("PNG");
  });

  it("is taken over from watch: the person signs in with clicks and keys while the agent is held, then hands it back", async () => {
    await agent.call("Page.navigate", { url: "https://shop.test/signin" });
    const layout = await until("the sign-in form", async () => {
      const text = (await evaluate(`(() => {
        const at = (id) => { const r = document.getElementById(id)?.getBoundingClientRect(); return r && [r.x + r.width / 2, r.y + r.height / 2]; };
        const button = at("sign-in");
        return button ? JSON.stringify({ width: innerWidth, height: innerHeight, account: at("account"), password: at("password"), button }) : null;
      })()`)) as string | null;
      return text
        ? (JSON.parse(text) as Record<string, [number, number]> & { width: number; height: number })
        : undefined;
    });

    watch = await watchStack(STACK, { projectDir: REPO, operator: "olivia" });
    const socket = new WebSocket(watch.url.replace(/^http/, "ws") + "live", {
      origin: `http://127.0.0.1:${watch.port}`,
    });
    const messages = watchMessages(socket);
    await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject));
    const send = (message: unknown) => socket.send(JSON.stringify(message));
    await until("a frame of the computer's screen", () => messages.some((m) => m.type === "frame"), 30_000);

    send({ type: "take", computer: COMPUTER });
    await until("the take", () => messages.some((m) => m.type === "takeover" && m.mine));
    // The agent is held: its input and its navigation are refused, naming the takeover and who holds it.
    for (const [method, params] of [
      ["Input.dispatchMouseEvent", { type: "mouseMoved", x: 1, y: 1 }],
      ["Page.navigate", { url: "https://shop.test/" }],
    ] as const) {
      const refused = await agent.send(method, params);
      expect(refused.error?.code, method).toBe(TAKEN_OVER_ERROR_CODE);
      expect(refused.error?.message).toContain("olivia");
    }

    const logBefore = (await env.proxyLog(COMPUTER)).length;
    const click = ([x, y]: [number, number]) => {
      for (const action of ["down", "up"])
        send({
          type: "input",
          computer: COMPUTER,
          input: {
            kind: "pointer",
            action,
            x: x / layout.width,
            y: y / layout.height,
            button: "left",
            clickCount: 1,
            modifiers: 0,
          },
        });
    };
    const type = (text: string) => {
      for (const char of text) {
        send({
          type: "input",
          computer: COMPUTER,
          input: { kind: "key", action: "down", key: char, code: "", text: char },
        });
        send({ type: "input", computer: COMPUTER, input: { kind: "key", action: "up", key: char, code: "" } });
      }
    };
    click(layout.account);
    type("ada");
    click(layout.password);
    type(PASSWORD);
    click(layout.button);
    await until(
      "the sign-in's submission through the computer's site proxy",
      async () =>
        (await env.proxyLog(COMPUTER))
          .slice(logBefore)
          .some((r) => r.event === "request" && r.method === "POST" && r.site === "shop"),
      30_000,
    );

    const from = agent.events.length;
    send({ type: "handBack", computer: COMPUTER });
    await agent.event(HAND_BACK_EVENT, from, 20_000);
    expect((await agent.send("Input.dispatchMouseEvent", { type: "mouseMoved", x: 1, y: 1 })).error).toBeUndefined();
    expect((await agent.send("Page.navigate", { url: "https://shop.test/" })).error).toBeUndefined();
    socket.close();

    // run.json: the takeover, by whom, its pointer presses on the form's fields, and no typed text.
    const runJson = path.join(ARTIFACTS, "run.json");
    const record = await until("the takeover in run.json", () => {
      if (!fs.existsSync(runJson)) return undefined;
      const r = JSON.parse(fs.readFileSync(runJson, "utf8"));
      return r.takeovers?.length > 0 ? r : undefined;
    });
    expect(record.humanAssisted).toBe(true);
    expect(record.takeovers[0]).toMatchObject({ computer: COMPUTER, operator: "olivia", keys: 3 + PASSWORD.length });
    const presses = (record.takeovers[0].inputs as { kind: string; action: string; target?: { id?: string } }[])
      .filter((i) => i.kind === "pointer" && i.action === "down")
      .map((i) => i.target?.id);
    expect(presses).toEqual(["account", "password", "sign-in"]);

    // The HAR: the sign-in is the person's, with nothing of what was sent.
    await collectCaptures(STACK, { projectDir: REPO });
    const harText = fs.readFileSync(path.join(ARTIFACTS, "requests", `${COMPUTER}.har`), "utf8");
    const entries = (JSON.parse(harText) as Har).log.entries as RequestLogEntry[];
    const signIn = entries.filter((e) => e.request.method === "POST" && e.request.url.endsWith("/signin"));
    expect(signIn).toHaveLength(1);
    expect(signIn[0]._multienv.human).toBe(true);
    // The agent's own navigation before the take is not.
    expect(entries.find((e) => e.request.method === "GET" && e.request.url.endsWith("/signin"))?._multienv.human).toBe(
      undefined,
    );

    // The password is in no log: no stored evidence, no container's own log, no proxy log.
    for (const file of filesUnder(ARTIFACTS)) expect(fs.readFileSync(file, "latin1"), file).not.toContain(PASSWORD);
    for (const { name } of await env.containers())
      expect(env.docker(name, ["logs", name]), name).not.toContain(PASSWORD);
    expect(JSON.stringify(await env.proxyLog(COMPUTER))).not.toContain(PASSWORD);
  }, 240_000);
});
