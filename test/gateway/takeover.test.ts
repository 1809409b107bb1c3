// A person takes a computer over through the gateway: the agent's DevTools connection (its agent token) is held, its
// acting commands refused with the takeover named and its reads answered, until the person hands the computer back;
// an agent may ask for a person on its own connection. Against the real gateway and a real headless Chromium.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { computerAgentToken } from "../../src/protocol/auth";
import {
  HAND_BACK_EVENT,
  MIN_HOLD_SECONDS,
  REQUEST_HUMAN_METHOD,
  REQUEST_TIMED_OUT_ERROR_CODE,
  TAKEN_OVER_ERROR_CODE,
  TAKEN_OVER_EVENT,
  takeoverPath,
  TAKEOVERS_PATH,
} from "../../src/protocol/takeover";
import { connectCdp, type CdpClient } from "../helpers/cdp";
import { startChromium, type Chromium } from "../helpers/chromium";
import { startUpstream, type Upstream } from "../helpers/servers";
import { until } from "../helpers/until";
import { request, startGateway, TOKEN, type GatewayProcess } from "./helpers";

const CONTROL = { Authorization: `Bearer ${TOKEN}` };
const AGENT = { Authorization: `Bearer ${computerAgentToken(TOKEN, "agent")}` };
const OTHER_AGENT = { Authorization: `Bearer ${computerAgentToken(TOKEN, "other")}` };
const PASSWORD = "hunter2-person-typed";

const FORM = `<!doctype html><title>sign in</title>
<form method="post" action="/submit">
  <input id="name" name="name" style="position:absolute;left:20px;top:20px;width:200px;height:30px">
  <input id="pw" name="pw" type="password" style="position:absolute;left:20px;top:70px;width:200px;height:30px">
  <button id="go" style="position:absolute;left:20px;top:120px;width:100px;height:30px">Send</button>
</form>`;

/** The page target's DevTools WebSocket URL, as the gateway rewrote it. */
async function pageTarget(gateway: GatewayProcess): Promise<string> {
  const list = JSON.parse((await request(`${gateway.url}/computers/agent/cdp/json/list`, { headers: CONTROL })).body);
  return (list as Array<{ type: string; webSocketDebuggerUrl: string }>).find((t) => t.type === "page")!
    .webSocketDebuggerUrl;
}

function take(gateway: GatewayProcess, computer: string, operator: string, headers: Record<string, string> = CONTROL) {
  return request(`${gateway.url}${takeoverPath(computer)}`, {
    method: "POST",
    headers: { ...headers, "Content-Type": "application/json" },
    body: JSON.stringify({ operator }),
    control: false,
  });
}

/** A take held for `holdSeconds` unless renewed. */
function takeFor(gateway: GatewayProcess, computer: string, operator: string, holdSeconds: number) {
  return request(`${gateway.url}${takeoverPath(computer)}`, {
    method: "POST",
    headers: { ...CONTROL, "Content-Type": "application/json" },
    body: JSON.stringify({ operator, holdSeconds }),
    control: false,
  });
}

function handBack(gateway: GatewayProcess, computer: string, headers: Record<string, string> = CONTROL) {
  return request(`${gateway.url}${takeoverPath(computer)}`, { method: "DELETE", headers, control: false });
}

/** A person's click at the centre of the element `selector`, as the watch page sends it. */
async function click(person: CdpClient, selector: string): Promise<void> {
  const { result } = await person.call("Runtime.evaluate", {
    expression: `JSON.stringify(document.querySelector(${JSON.stringify(selector)}).getBoundingClientRect())`,
    returnByValue: true,
  });
  const rect = JSON.parse((result as { value: string }).value);
  const at = { x: rect.x + rect.width / 2, y: rect.y + rect.height / 2, button: "left", clickCount: 1 };
  await person.call("Input.dispatchMouseEvent", { type: "mousePressed", ...at });
  await person.call("Input.dispatchMouseEvent", { type: "mouseReleased", ...at });
}

async function type(person: CdpClient, text: string): Promise<void> {
  for (const char of text) {
    await person.call("Input.dispatchKeyEvent", { type: "keyDown", text: char, key: char });
    await person.call("Input.dispatchKeyEvent", { type: "keyUp", key: char });
  }
}

describe("a takeover holds the agent while a person acts", () => {
  let browser: Chromium;
  let site: Upstream;
  let gateway: GatewayProcess;
  const submitted: string[] = [];

  beforeAll(async () => {
    browser = await startChromium();
    site = await startUpstream((req, res) => {
      if (req.method === "POST") {
        let body = "";
        req.on("data", (chunk) => (body += chunk));
        req.on("end", () => {
          submitted.push(body);
          res.end("<title>done</title>");
        });
        return;
      }
      res.end(req.url === "/after" ? "<title>after</title>" : FORM);
    });
    gateway = await startGateway({
      sites: {},
      computers: { agent: { cdp: browser.cdp }, other: { cdp: browser.cdp } },
    });
  });
  afterAll(async () => {
    await gateway?.stop();
    await site?.close();
  });

  it("refuses the agent's acting commands naming the takeover, answers its reads, and lets the person's input through", async () => {
    const target = await pageTarget(gateway);
    const agent = await connectCdp(target, AGENT);
    const person = await connectCdp(target, CONTROL);
    await agent.call("Page.navigate", { url: `${site.url}/` });
    await until("the form", async () => {
      const { result } = await agent.call("Runtime.evaluate", {
        expression: "!!document.querySelector('#go')",
        returnByValue: true,
      });
      return (result as { value: boolean }).value;
    });

    const taken = await take(gateway, "agent", "alice");
    expect(taken.status).toBe(200);
    expect(JSON.parse(taken.body).taken.operator).toBe("alice");
    const takenOver = await agent.event(TAKEN_OVER_EVENT);
    expect(takenOver.params).toMatchObject({ computer: "agent", operator: "alice" });

    // Acting commands, on the page's session and through the browser's endpoint alike, are refused at once.
    for (const [method, params] of [
      ["Input.dispatchMouseEvent", { type: "mousePressed", x: 10, y: 10, button: "left", clickCount: 1 }],
      ["Page.navigate", { url: `${site.url}/after` }],
      ["Runtime.evaluate", { expression: "document.title = 'agent was here'" }],
      ["Emulation.setDeviceMetricsOverride", { width: 1, height: 1, deviceScaleFactor: 1, mobile: false }],
      ["Fetch.enable", {}],
    ] as const) {
      const answer = await agent.send(method, params);
      expect(answer.error?.code, method).toBe(TAKEN_OVER_ERROR_CODE);
      expect(answer.error?.message).toContain("taken over by a person (alice");
      expect(answer.error?.message).toContain(method);
    }
    // A repeated key cannot smuggle an acting method past the check: the gateway passes on what it read.
    const smuggled = await agent.sendRaw(
      '{"id":9001,"method":"Input.insertText","method":"DOM.getDocument","params":{"text":"x"}}',
      9001,
    );
    expect(smuggled.result?.root).toBeTruthy();
    // Reads answer.
    expect((await agent.call("Page.captureScreenshot", { format: "png" })).data).toBeTruthy();
    expect((await agent.call("DOM.getDocument", {})).root).toBeTruthy();
    expect((await agent.call("Accessibility.getFullAXTree", {})).nodes).toBeTruthy();
    // DevTools' HTTP endpoint: the listing reads, opening a tab acts.
    expect(
      (await request(`${gateway.url}/computers/agent/cdp/json/list`, { headers: AGENT, control: false })).status,
    ).toBe(200);
    const opened = await request(`${gateway.url}/computers/agent/cdp/json/new?about:blank`, {
      method: "PUT",
      headers: AGENT,
      control: false,
    });
    expect(opened.status).toBe(409);
    expect(opened.body).toContain("taken over by a person");

    // The person fills and submits the form.
    await click(person, "#name");
    await type(person, "alice");
    await click(person, "#pw");
    await type(person, PASSWORD);
    await click(person, "#go");
    await until("the form's submission", () => submitted.length > 0);
    expect(submitted[0]).toBe(`name=alice&pw=${PASSWORD}`);

    // Hand back: the agent hears of it and acts again.
    const from = agent.events.length;
    const back = await handBack(gateway, "agent");
    expect(back.status).toBe(200);
    expect((await agent.event(HAND_BACK_EVENT, from)).params).toMatchObject({ computer: "agent", operator: "alice" });
    expect((await agent.send("Page.navigate", { url: `${site.url}/after` })).error).toBeUndefined();
    await until("the agent's navigation", async () => {
      const { result } = await agent.call("Runtime.evaluate", { expression: "document.title", returnByValue: true });
      return (result as { value: string }).value === "after";
    });
    expect((await agent.send("Input.dispatchMouseEvent", { type: "mouseMoved", x: 5, y: 5 })).error).toBeUndefined();

    // The person typed a password: no gateway line holds it.
    expect(JSON.stringify(gateway.logs)).not.toContain(PASSWORD);
    expect(gateway.logs.map((line) => line.event)).toEqual(expect.arrayContaining(["taken-over", "handed-back"]));
    agent.close();
    person.close();
  });

  it("never lets an agent have the browser itself connect to a DevTools endpoint of the agent's choosing", async () => {
    // A listener on loopback stands in for a DevTools endpoint the agent must not reach (the standby Chromium's).
    const connections: string[] = [];
    const lure = await startUpstream((req, res) => {
      connections.push(req.url ?? "");
      res.end("[]");
    });
    try {
      const version = JSON.parse(
        (await request(`${gateway.url}/computers/agent/cdp/json/version`, { headers: AGENT })).body,
      ) as { webSocketDebuggerUrl: string };
      const agent = await connectCdp(version.webSocketDebuggerUrl, AGENT);
      const port = Number(new URL(lure.url).port);
      await agent.call("Target.setDiscoverTargets", { discover: true });
      const answer = await agent.send("Target.setRemoteLocations", { locations: [{ host: "127.0.0.1", port }] });
      expect(answer.error?.message).toMatch(/Target\.setRemoteLocations is not open to an agent/);
      // Chromium polls a remote location's target list every second once it is set; the browser asked nothing.
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      expect(connections).toEqual([]);
      await agent.call("Target.setDiscoverTargets", { discover: false });
      agent.close();
    } finally {
      await lure.close();
    }
  });

  it("never lets an agent token take a computer over or hand it back, its own or another", async () => {
    const presented: Record<string, string>[] = [
      AGENT,
      OTHER_AGENT,
      { "X-Multienv-Token": computerAgentToken(TOKEN, "agent") },
      {},
    ];
    for (const headers of presented) {
      expect((await take(gateway, "agent", "mallory", headers)).status).toBe(401);
      expect((await handBack(gateway, "agent", headers)).status).toBe(401);
      expect((await request(`${gateway.url}${TAKEOVERS_PATH}`, { headers, control: false })).status).toBe(401);
    }
    expect(JSON.parse((await request(`${gateway.url}${takeoverPath("agent")}`, { headers: CONTROL })).body)).toEqual(
      {},
    );
  });

  it("answers a second take with 409 and a hand-back of a computer nobody holds with 409", async () => {
    expect((await take(gateway, "other", "bob")).status).toBe(200);
    const again = await take(gateway, "other", "carol");
    expect(again.status).toBe(409);
    expect(JSON.parse(again.body).taken.operator).toBe("bob");
    expect((await handBack(gateway, "other")).status).toBe(200);
    expect((await handBack(gateway, "other")).status).toBe(409);
    expect((await take(gateway, "other", "")).status).toBe(400);
    expect((await take(gateway, "other", "bad\nname")).status).toBe(400);
  });

  it("times an agent's request for a person out cleanly, showing it meanwhile on its own computer alone", async () => {
    const agent = await connectCdp(await pageTarget(gateway), AGENT);
    const answer = agent.send(REQUEST_HUMAN_METHOD, { reason: "a CAPTCHA", timeoutSeconds: 1 });
    const listing = await until("the request in the listing", async () => {
      const body = JSON.parse((await request(`${gateway.url}${TAKEOVERS_PATH}`, { headers: CONTROL })).body);
      return body.computers.agent.request ? body : undefined;
    });
    expect(listing.computers.agent.request.reason).toBe("a CAPTCHA");
    expect(listing.computers.other).toEqual({});
    const refused = await answer;
    expect(refused.error?.code).toBe(REQUEST_TIMED_OUT_ERROR_CODE);
    expect(refused.error?.message).toContain("within 1 s");
    expect(JSON.parse((await request(`${gateway.url}${takeoverPath("agent")}`, { headers: CONTROL })).body)).toEqual(
      {},
    );
    // Bad params are answered, not waited on.
    expect((await agent.send(REQUEST_HUMAN_METHOD, { reason: "" })).error?.message).toContain("params.reason");
    expect((await agent.send(REQUEST_HUMAN_METHOD, { reason: "x", timeoutSeconds: 1e9 })).error?.message).toContain(
      "params.timeoutSeconds",
    );
    agent.close();
  });

  it("answers an agent's request for a person when the person hands back, the reason kept on the takeover", async () => {
    const agent = await connectCdp(await pageTarget(gateway), AGENT);
    const answer = agent.send(REQUEST_HUMAN_METHOD, { reason: "a second factor", timeoutSeconds: 60 });
    await until(
      "the request",
      async () =>
        JSON.parse((await request(`${gateway.url}${takeoverPath("agent")}`, { headers: CONTROL })).body).request,
    );
    const taken = JSON.parse((await take(gateway, "agent", "dana")).body);
    expect(taken.taken.reason).toBe("a second factor");
    expect((await handBack(gateway, "agent")).status).toBe(200);
    const answered = await answer;
    expect(answered.error).toBeUndefined();
    expect(answered.result).toMatchObject({ computer: "agent", operator: "dana" });
    agent.close();
  });
});

describe("a takeover on a gateway of several workers", () => {
  let browser: Chromium;
  let gateway: GatewayProcess;

  beforeAll(async () => {
    browser = await startChromium();
    gateway = await startGateway({ sites: {}, workers: 2, computers: { agent: { cdp: browser.cdp } } });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it("holds the agent's connections on every worker, whichever worker the take and the hand-back reached", async () => {
    const version = JSON.parse(
      (await request(`${gateway.url}/computers/agent/cdp/json/version`, { headers: CONTROL })).body,
    );
    // Connections are spread over the workers: enough of them that both hold some.
    const agents = await Promise.all(Array.from({ length: 6 }, () => connectCdp(version.webSocketDebuggerUrl, AGENT)));
    expect((await take(gateway, "agent", "erin")).status).toBe(200);
    for (const agent of agents) {
      await agent.event(TAKEN_OVER_EVENT);
      expect((await agent.send("Target.createTarget", { url: "about:blank" })).error?.code).toBe(TAKEN_OVER_ERROR_CODE);
    }
    // Every worker answers the state alike.
    for (let i = 0; i < 4; i++)
      expect(
        JSON.parse((await request(`${gateway.url}${takeoverPath("agent")}`, { headers: CONTROL })).body).taken,
      ).toMatchObject({ operator: "erin" });
    expect((await handBack(gateway, "agent")).status).toBe(200);
    for (const agent of agents) {
      await agent.event(HAND_BACK_EVENT);
      expect((await agent.send("Target.getTargets", {})).error).toBeUndefined();
      agent.close();
    }
  });

  it("ends a hold taken through one worker when it runs out unrenewed: once, every agent connection on every worker freed", async () => {
    const version = JSON.parse(
      (await request(`${gateway.url}/computers/agent/cdp/json/version`, { headers: CONTROL })).body,
    );
    const agents = await Promise.all(Array.from({ length: 6 }, () => connectCdp(version.webSocketDebuggerUrl, AGENT)));
    const taken = await takeFor(gateway, "agent", "frank", MIN_HOLD_SECONDS);
    expect(taken.status).toBe(200);
    const { since } = JSON.parse(taken.body).taken as { since: string };
    for (const agent of agents) {
      await agent.event(TAKEN_OVER_EVENT);
      expect((await agent.send("Target.createTarget", { url: "about:blank" })).error?.code).toBe(TAKEN_OVER_ERROR_CODE);
    }
    // Nobody renews it: every worker's timer runs out, and the one the state's keeper lets end it tells every worker.
    for (const agent of agents) {
      const handedBack = await agent.event(HAND_BACK_EVENT, 0, (MIN_HOLD_SECONDS + 10) * 1000);
      expect(handedBack.params).toMatchObject({ computer: "agent", operator: "frank", ended: "hold-expired" });
      expect(agent.events.filter((event) => event.method === HAND_BACK_EVENT)).toHaveLength(1);
      expect((await agent.send("Target.getTargets", {})).error).toBeUndefined();
    }
    // Every worker answers the computer free, and the hold's end was made and logged once.
    for (let i = 0; i < 4; i++)
      expect(JSON.parse((await request(`${gateway.url}${takeoverPath("agent")}`, { headers: CONTROL })).body)).toEqual(
        {},
      );
    const ends = () =>
      gateway.logs.filter((line) => line.event === "handed-back" && line.since === since && line.computer === "agent");
    await until("the hold's end logged", () => ends().length > 0);
    expect(ends()).toEqual([expect.objectContaining({ ended: "hold-expired", operator: "frank" })]);
    // Free where the state is kept too: another person may take it, through whichever worker.
    expect((await take(gateway, "agent", "gina")).status).toBe(200);
    expect((await handBack(gateway, "agent")).status).toBe(200);
    for (const agent of agents) agent.close();
  });
});
