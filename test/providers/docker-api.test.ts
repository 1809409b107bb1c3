// The e2e tier's Docker Engine API client against a fake engine on a unix socket: errors carry the engine's
// message, a missing socket says to start dockerd, and multiplexed logs come back as text.
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { containerLogs, dockerApi } from "../../src/providers/docker-api";

const socket = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "multienv-docker-api-")), "docker.sock");
let server: http.Server;

function frame(stream: 1 | 2, text: string): Buffer {
  const body = Buffer.from(text);
  const head = Buffer.alloc(8);
  head[0] = stream;
  head.writeUInt32BE(body.length, 4);
  return Buffer.concat([head, body]);
}

beforeAll(async () => {
  server = http.createServer((req, res) => {
    if (req.url === "/containers/missing/json") {
      res.writeHead(404, { "content-type": "application/json" });
      return res.end(JSON.stringify({ message: "No such container: missing" }));
    }
    if (req.url?.startsWith("/containers/c1/logs"))
      return res.end(Buffer.concat([frame(1, "out line\n"), frame(2, "err line\n")]));
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ method: req.method, url: req.url }));
  });
  await new Promise<void>((r) => server.listen(socket, r));
});

afterAll(() => server.close());

describe("dockerApi", () => {
  it("sends JSON over the socket and names the engine's error", async () => {
    const api = dockerApi(socket);
    expect(await api.request("POST", "/networks/create", { Name: "n" })).toEqual({
      method: "POST",
      url: "/networks/create",
    });
    await expect(api.request("GET", "/containers/missing/json")).rejects.toThrow(
      "Docker Engine API GET /containers/missing/json: 404 No such container: missing",
    );
  });

  it("says to start dockerd when the socket is not there", async () => {
    await expect(dockerApi("/nonexistent/docker.sock").request("GET", "/info")).rejects.toThrow(
      /not reachable .*; start dockerd/,
    );
  });

  it("reads multiplexed container logs as text", async () => {
    expect(await containerLogs(dockerApi(socket), "c1")).toBe("out line\nerr line\n");
  });
});
