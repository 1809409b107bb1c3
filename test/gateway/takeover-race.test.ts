// Two operators take the same computer at the same moment, each from a process of their own (curl), against the real
// gateway, round after round: exactly one wins, the other is refused with 409 naming who holds it, never both; and of
// two hand-backs at once exactly one is made. With several workers the two takes land on different processes of the
// gateway. The computer's site proxy is a stand-in that takes its time to answer, so that both takes are under way
// together.
import { execFile } from "node:child_process";
import { afterAll, describe, expect, it } from "vitest";
import { takeoverPath } from "../../src/protocol/takeover";
import { cleanup } from "../helpers/processes";
import { startUpstream } from "../helpers/servers";
import { startGateway, TOKEN, type GatewayProcess } from "./helpers";

afterAll(cleanup);

const ROUNDS = 8;

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

/** One request from a curl process of its own. */
function curl(gateway: GatewayProcess, method: string, body?: unknown): Promise<Answer> {
  const args = ["-s", "-X", method, "-H", `Authorization: Bearer ${TOKEN}`, "-w", "\n%{http_code}"];
  if (body !== undefined) args.push("-H", "Content-Type: application/json", "--data", JSON.stringify(body));
  args.push(`${gateway.url}${takeoverPath("agent")}`);
  return new Promise((resolve, reject) =>
    execFile("curl", args, { timeout: 30_000 }, (error, stdout) => {
      if (error) return reject(error);
      const newline = stdout.lastIndexOf("\n");
      resolve({ status: Number(stdout.slice(newline + 1)), body: JSON.parse(stdout.slice(0, newline) || "{}") });
    }),
  );
}

describe.each([2, 1])("two operators racing for a computer on a gateway of %i worker(s)", (workers) => {
  it(`gives it to exactly one of them, the other told who holds it, in each of ${ROUNDS} rounds`, async () => {
    // The site proxy's person mark, answered after a while: both takes wait on it together.
    const proxy = await startUpstream((req, res) => {
      req.resume();
      setTimeout(() => (res.writeHead(204), res.end()), 150);
    });
    const gateway = await startGateway({
      sites: {},
      workers,
      computers: {
        agent: { cdp: `${proxy.url}/cdp`, requests: `${proxy.url}/requests`, person: `${proxy.url}/person` },
      },
    });
    for (let round = 1; round <= ROUNDS; round++) {
      const operators = [`ana-${round}`, `bo-${round}`];
      const takes = await Promise.all(operators.map((operator) => curl(gateway, "POST", { operator })));
      expect(takes.map((t) => t.status).sort(), `round ${round}: ${JSON.stringify(takes)}`).toEqual([200, 409]);
      const winner = takes.find((t) => t.status === 200)!;
      const loser = takes.find((t) => t.status === 409)!;
      const holder = (winner.body.taken as { operator: string }).operator;
      expect(operators).toContain(holder);
      expect(loser.body).toMatchObject({
        error: "a person holds this computer already",
        computer: "agent",
        taken: { operator: holder },
      });
      expect((await curl(gateway, "GET")).body).toMatchObject({ taken: { operator: holder } });

      const handBacks = await Promise.all([curl(gateway, "DELETE"), curl(gateway, "DELETE")]);
      expect(handBacks.map((h) => h.status).sort(), `round ${round}`).toEqual([200, 409]);
      expect(handBacks.find((h) => h.status === 200)!.body).toMatchObject({ handedBack: { operator: holder } });
      expect((await curl(gateway, "GET")).body).toEqual({});
    }
    // The gateway's own record agrees: one take and one hand-back a round.
    expect(gateway.logs.filter((l) => l.event === "taken-over")).toHaveLength(ROUNDS);
    expect(gateway.logs.filter((l) => l.event === "handed-back")).toHaveLength(ROUNDS);
  }, 120_000);
});
