// A person takes a computer over from `watch`: the page's live channel takes it (the gateway then holds the agent),
// the person's clicks and keys fill and submit a form in the real Chromium, the hand-back gives the agent its computer
// back, and the record of the takeover keeps the pointer events and their targets but no typed text. Against the
// real gateway and a real headless Chromium on loopback.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { computerAgentToken } from "../../src/protocol/auth";
import {
  HAND_BACK_EVENT,
  MIN_HOLD_SECONDS,
  REQUEST_HUMAN_METHOD,
  TAKEN_OVER_ERROR_CODE,
  TAKEOVERS_PATH,
  takeoverPath,
} from "../../src/protocol/takeover";
import { formatStackList } from "../../src/runner/operator/format";
import { listStacks } from "../../src/runner/operator/operator";
import { takeoverGateway, type TakeoverRecord } from "../../src/runner/operator/takeover";
import { episodeTakeovers, recordTakeover } from "../../src/runner/evidence/takeovers";
import { readRunRecord, writeRunRecord } from "../../src/runner/evidence/run-record";
import { computerFeed } from "../../src/runner/operator/watch";
import { startWatchServer, type WatchMessage, type WatchServer } from "../../src/runner/operator/watch-server";
import { connectCdp, type CdpClient } from "../helpers/cdp";
import { startChromium } from "../helpers/chromium";
import { cleanup, onCleanup, spawnService, tempDir } from "../helpers/processes";
import { startUpstream } from "../helpers/servers";
import { until } from "../helpers/until";
import { watchMessages } from "../helpers/watch";
import { request, TOKEN, type GatewayProcess } from "../gateway/helpers";
import { projectWith, ROOT_STACK, startBrowserWithAgent, startTestGateway } from "./helpers";

afterAll(cleanup);

const PASSWORD = "s3cret-typed-by-person";
const FORM = `<!doctype html><title>sign in</title><body style="margin:0">
<form method="post" action="/submit">
  <input id="name" name="name" style="position:absolute;left:20px;top:20px;width:200px;height:30px">
  <input id="pw" name="pw" type="password" style="position:absolute;left:20px;top:70px;width:200px;height:30px">
  <button id="go" style="position:absolute;left:20px;top:120px;width:100px;height:30px">Send</button>
</form>`;

interface Viewer {
  socket: WebSocket;
  messages: WatchMessage[];
  send(message: unknown): void;
}

async function view(server: WatchServer, origin?: string): Promise<Viewer> {
  const url = server.url.replace(/^http/, "ws") + "live";
  const socket = new WebSocket(url, { origin: origin ?? `http://127.0.0.1:${server.port}` });
  const messages = watchMessages(socket);
  await new Promise((resolve, reject) => {
    socket.once("open", resolve);
    socket.once("error", reject);
  });
  return { socket, messages, send: (message) => socket.send(JSON.stringify(message)) };
}

describe("a takeover from watch", () => {
  let gateway: GatewayProcess;
  let agent: CdpClient;
  let viewport: { width: number; height: number };
  const submitted: string[] = [];
  const records: TakeoverRecord[] = [];
  let server: WatchServer;
  let siteUrl: string;

  beforeAll(async () => {
    const site = await startUpstream((req, res) => {
      if (req.method === "POST") {
        let body = "";
        req.on("data", (chunk) => (body += chunk));
        req.on("end", () => (submitted.push(body), res.end("<title>done</title>")));
        return;
      }
      res.end(FORM);
    });
    onCleanup(() => site.close());
    siteUrl = site.url;
    ({ gateway, agent } = await startBrowserWithAgent());
    await agent.call("Page.navigate", { url: `${site.url}/` });
    viewport = await until("the form", async () => {
      const { result } = await agent.call("Runtime.evaluate", {
        expression: "document.querySelector('#go') && JSON.stringify({ width: innerWidth, height: innerHeight })",
        returnByValue: true,
      });
      const value = (result as { value: string | null }).value;
      return value ? JSON.parse(value) : undefined;
    });
    const access = { gatewayUrl: gateway.url, controlToken: TOKEN };
    server = await startWatchServer({
      stack: "task",
      feeds: { agent: computerFeed(access, "agent") },
      takeover: {
        gateway: takeoverGateway(gateway.url, TOKEN),
        operator: "olivia",
        onTakeover: (r) => void records.push(r),
      },
    });
    onCleanup(() => server.close());
  });

  it("takes the computer, fills and submits its form with the person's clicks and keys, and hands it back", async () => {
    const viewer = await view(server);
    await until("a frame", () => viewer.messages.some((m) => m.type === "frame"), 20_000);
    viewer.send({ type: "take", computer: "agent" });
    await until("the take", () => viewer.messages.some((m) => m.type === "takeover" && m.mine));
    // Meanwhile the agent is held.
    const refused = await agent.send("Input.dispatchMouseEvent", { type: "mouseMoved", x: 1, y: 1 });
    expect(refused.error?.code).toBe(TAKEN_OVER_ERROR_CODE);
    expect(refused.error?.message).toContain("olivia");

    const at = (x: number, y: number) => ({ x: x / viewport.width, y: y / viewport.height });
    const click = (x: number, y: number) => {
      for (const action of ["down", "up"])
        viewer.send({
          type: "input",
          computer: "agent",
          input: { kind: "pointer", action, ...at(x, y), button: "left", clickCount: 1, modifiers: 0 },
        });
    };
    const type = (text: string) => {
      for (const char of text) {
        viewer.send({
          type: "input",
          computer: "agent",
          input: { kind: "key", action: "down", key: char, code: "", text: char },
        });
        viewer.send({ type: "input", computer: "agent", input: { kind: "key", action: "up", key: char, code: "" } });
      }
    };
    click(120, 35);
    type("ada");
    click(120, 85);
    type(PASSWORD);
    // Messages the page never sends are dropped, whole.
    viewer.send({ type: "input", computer: "agent", input: { kind: "pointer", action: "down", x: 5, y: 0.1 } });
    viewer.send({ type: "input", computer: "other", input: { kind: "paste", text: "x" } });
    viewer.send({ type: "input", computer: "agent", input: { kind: "navigate", url: "javascript:alert(1)" } });
    click(70, 135);
    await until("the form's submission", () => submitted.length > 0, 20_000);
    expect(submitted[0]).toBe(`name=ada&pw=${PASSWORD}`);

    const from = agent.events.length;
    viewer.send({ type: "handBack", computer: "agent" });
    await agent.event(HAND_BACK_EVENT, from);
    // Written at the take and at each renewal; the last, at the hand-back, says so.
    const record = await until("the record of the hand-back", () => records.find((r) => r.ended === "handed-back"));
    expect((await agent.send("Input.dispatchMouseEvent", { type: "mouseMoved", x: 1, y: 1 })).error).toBeUndefined();

    expect(record).toMatchObject({ computer: "agent", operator: "olivia", keys: 3 + PASSWORD.length, pastes: 0 });
    const presses = record.inputs.filter((i) => i.kind === "pointer" && i.action === "down");
    expect(presses.map((i) => (i as { target?: { id?: string } }).target?.id)).toEqual(["name", "pw", "go"]);
    expect(presses[1]).toMatchObject({ x: 120, y: 85, target: { tag: "input", type: "password" } });
    expect(Date.parse(record.end)).toBeGreaterThanOrEqual(Date.parse(record.start));
    // No typed text, least of all the password, in the record or the gateway's log.
    for (const text of [JSON.stringify(records), JSON.stringify(gateway.logs)]) {
      expect(text).not.toContain(PASSWORD);
      expect(text).not.toContain("ada");
    }
    viewer.socket.close();
  });

  it("brings another of the tabs the page lists to the front, shows it, and records the tab's host", async () => {
    const control = { headers: { Authorization: `Bearer ${TOKEN}` } };
    // A second tab, opened by someone else (the agent): it comes to the front.
    const opened = JSON.parse(
      (await request(`${gateway.url}/computers/agent/cdp/json/new?${siteUrl}/other`, { ...control, method: "PUT" }))
        .body,
    ) as { id: string };
    onCleanup(() =>
      request(`${gateway.url}/computers/agent/cdp/json/close/${opened.id}`, control).then(() => undefined),
    );
    const viewer = await view(server);
    const tabsOf = () =>
      viewer.messages.filter((m): m is Extract<WatchMessage, { type: "tabs" }> => m.type === "tabs").at(-1)?.tabs;
    const listed = await until(
      "both tabs listed, the new one in front",
      () => {
        const tabs = tabsOf();
        return tabs?.length === 2 && tabs[0].id === opened.id ? tabs : undefined;
      },
      20_000,
    );
    const form = listed[1];
    viewer.send({ type: "take", computer: "agent" });
    await until("the take", () => viewer.messages.some((m) => m.type === "takeover" && m.mine));
    // A tab the page never listed, or no tab id at all, is no switch.
    viewer.send({ type: "input", computer: "agent", input: { kind: "tab", targetId: "0".repeat(32) } });
    await until("the refusal", () =>
      viewer.messages.some((m) => m.type === "error" && m.message.includes("has no such tab")),
    );
    viewer.send({ type: "input", computer: "agent", input: { kind: "tab", targetId: "../../json/close/x" } });

    const from = viewer.messages.length;
    viewer.send({ type: "input", computer: "agent", input: { kind: "tab", targetId: form.id } });
    await until(
      "the form's tab on screen",
      () => viewer.messages.slice(from).some((m) => m.type === "url" && m.url === form.url),
      20_000,
    );
    expect(tabsOf()?.[0].id).toBe(form.id);
    const count = records.length;
    viewer.send({ type: "handBack", computer: "agent" });
    await until("the record", () => records.length > count);
    expect(records.at(-1)!.inputs).toEqual([{ at: expect.any(String), kind: "tab", host: new URL(siteUrl).host }]);
    viewer.socket.close();
  });

  it("refuses the live channel to another origin", async () => {
    await expect(view(server, "http://evil.test")).rejects.toThrow(/403/);
  });

  it("takes a computer at start and hands it back when the page closes", async () => {
    const taking = await startWatchServer({
      stack: "task",
      feeds: { agent: computerFeed({ gatewayUrl: gateway.url, controlToken: TOKEN }, "agent") },
      takeover: {
        gateway: takeoverGateway(gateway.url, TOKEN),
        operator: "pat",
        onTakeover: (r) => void records.push(r),
      },
      takeNow: "agent",
    });
    onCleanup(() => taking.close());
    const state = async () =>
      JSON.parse(
        (await request(`${gateway.url}${takeoverPath("agent")}`, { headers: { Authorization: `Bearer ${TOKEN}` } }))
          .body,
      );
    expect((await state()).taken.operator).toBe("pat");
    const viewer = await view(taking);
    await until("the state on the page", () => viewer.messages.some((m) => m.type === "takeover" && m.mine));
    viewer.socket.close();
    await taking.handedBack();
    expect(await state()).toEqual({});
    expect(records.at(-1)).toMatchObject({ operator: "pat", keys: 0 });
  });
});

describe("a takeover in run.json", () => {
  it("is appended with its episode, marks the run human-assisted, and goes with its episode's record", async () => {
    const dir = tempDir();
    const stack = "task";
    await writeRunRecord(dir, { ...(await readRunRecord(dir, stack)), episode: 2 });
    const takeover: TakeoverRecord = {
      computer: "agent",
      operator: "olivia",
      reason: "a CAPTCHA",
      start: "2026-01-01T00:00:00.000Z",
      end: "2026-01-01T00:01:00.000Z",
      inputs: [{ at: "2026-01-01T00:00:10.000Z", kind: "pointer", action: "down", button: "left", x: 1, y: 2 }],
      pointerMoves: 3,
      keys: 4,
      pastes: 0,
      pastedChars: 0,
    };
    await recordTakeover(dir, stack, takeover);
    const record = await readRunRecord(dir, stack);
    expect(record.humanAssisted).toBe(true);
    expect(record.takeovers).toEqual([{ ...takeover, episode: 2 }]);
    expect(episodeTakeovers(record, 2)).toEqual({ takeovers: [{ ...takeover, episode: 2 }], humanAssisted: true });
    expect(episodeTakeovers(record, 1)).toEqual({});
  });
});

describe("ls and a person", () => {
  it("marks the computers a person holds and those whose agent asks for one, read from the gateway with the control token", async () => {
    const browser = await startChromium();
    const proxyLog = await startUpstream((_req, res) => res.end(""));
    onCleanup(() => proxyLog.close());
    const computer = { cdp: browser.cdp, proxyLog: `${proxyLog.url}/log` };
    const gateway = await startTestGateway({ sites: {}, computers: { desktop: computer, helper: computer } });
    await takeoverGateway(gateway.url, TOKEN).take("helper", "olivia");
    // desktop's agent asks through its own connection, with its own token.
    const list = JSON.parse(
      (
        await request(`${gateway.url}/computers/desktop/cdp/json/list`, {
          headers: { Authorization: `Bearer ${TOKEN}` },
        })
      ).body,
    ) as Array<{ type: string; webSocketDebuggerUrl: string }>;
    const agentToken = computerAgentToken(TOKEN, "desktop");
    const agent = await connectCdp(list.find((t) => t.type === "page")!.webSocketDebuggerUrl, {
      Authorization: `Bearer ${agentToken}`,
    });
    onCleanup(() => agent.close());
    // Left waiting: the connection closes at the end of the file.
    agent.send(REQUEST_HUMAN_METHOD, { reason: "a CAPTCHA", timeoutSeconds: 60 }).catch(() => undefined);
    await until(
      "the request",
      async () => (await takeoverGateway(gateway.url, TOKEN).states()).computers.desktop.request,
    );
    // The listing is the control token's: the agent's token does not read it.
    expect(
      (await request(`${gateway.url}${TAKEOVERS_PATH}`, { headers: { Authorization: `Bearer ${agentToken}` } })).status,
    ).toBe(401);

    const options = projectWith({
      task: { resources: [ROOT_STACK({ gatewayUrl: gateway.url })] },
      // Deployed, its gateway gone.
      silent: { resources: [ROOT_STACK({ gatewayUrl: "http://127.0.0.1:1" })] },
      fresh: null,
    });
    const accessOf = async (stack: string) => ({
      gatewayUrl: stack === "task" ? gateway.url : "http://127.0.0.1:1",
      controlToken: TOKEN,
    });
    const { stacks } = await listStacks(options, accessOf);
    expect(Object.fromEntries(stacks.map((s) => [s.stack, s.persons]))).toEqual({
      task: {
        desktop: { request: expect.objectContaining({ reason: "a CAPTCHA" }) },
        helper: { taken: expect.objectContaining({ operator: "olivia" }) },
      },
      silent: null,
      fresh: null,
    });
    expect(
      formatStackList({ stacks })
        .split("\n")
        .find((line) => line.startsWith("task ")),
    ).toContain("desktop:asks,helper:taken(olivia)");
  });
});

describe("a watch killed mid-takeover", () => {
  it("loses its hold: the gateway hands the computer back when the hold runs out, the agent is told why, and run.json says when and why it ended", async () => {
    const { gateway, agent } = await startBrowserWithAgent();
    const artifactsDir = tempDir();
    const holder = spawnService(["--import", "tsx", "test/runner/watch-holder.ts"], {
      WATCH_HOLDER: JSON.stringify({
        gatewayUrl: gateway.url,
        controlToken: TOKEN,
        computer: "agent",
        stack: "task",
        artifactsDir,
        holdSeconds: MIN_HOLD_SECONDS,
      }),
    });
    onCleanup(() => holder.process.kill("SIGKILL"));
    await holder.waitForLog((line) => line.event === "held", 60_000);
    const refused = await agent.send("Input.dispatchMouseEvent", { type: "mouseMoved", x: 1, y: 1 });
    expect(refused.error?.code).toBe(TAKEN_OVER_ERROR_CODE);
    // It renews its hold while it lives: held past the first hold's end.
    await new Promise((r) => setTimeout(r, (MIN_HOLD_SECONDS + 2) * 1000));
    expect((await agent.send("Input.dispatchMouseEvent", { type: "mouseMoved", x: 1, y: 1 })).error?.code).toBe(
      TAKEN_OVER_ERROR_CODE,
    );

    const from = agent.events.length;
    const killedAt = Date.now();
    holder.process.kill("SIGKILL");
    const handBack = await agent.event(HAND_BACK_EVENT, from, (MIN_HOLD_SECONDS + 10) * 1000);
    expect(handBack.params).toMatchObject({ computer: "agent", operator: "holder", ended: "hold-expired" });
    expect(Date.now() - killedAt).toBeLessThan((MIN_HOLD_SECONDS + 5) * 1000);
    expect((await agent.send("Input.dispatchMouseEvent", { type: "mouseMoved", x: 1, y: 1 })).error).toBeUndefined();
    expect(await takeoverGateway(gateway.url, TOKEN).states()).toEqual({ computers: { agent: {} } });
    expect(gateway.logs).toContainEqual(
      expect.objectContaining({ event: "handed-back", computer: "agent", ended: "hold-expired" }),
    );

    // The record the killed watch left: the takeover, ended when its last renewed hold ran out.
    const [record] = (await readRunRecord(artifactsDir, "task")).takeovers ?? [];
    expect(record).toMatchObject({ computer: "agent", operator: "holder", ended: "hold-expired" });
    const until = Date.parse((handBack.params as { until: string }).until);
    expect(Date.parse(record.end)).toBeGreaterThan(Date.parse(record.start) + MIN_HOLD_SECONDS * 1000);
    expect(Math.abs(until - Date.parse(record.end))).toBeLessThan(2_000);
  });
});
