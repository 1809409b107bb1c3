// A raw DevTools client for tests: one WebSocket, commands answered by id (a CDP error kept, not thrown, so a test
// can read the refusal), events collected in order.
import { WebSocket } from "ws";
import { until } from "./until";

export interface CdpAnswer {
  id: number;
  result?: Record<string, unknown>;
  error?: { code: number; message: string };
  sessionId?: string;
}

export interface CdpEvent {
  method: string;
  params: Record<string, unknown>;
  sessionId?: string;
}

export interface CdpClient {
  socket: WebSocket;
  /** Every event received, in order. */
  events: CdpEvent[];
  /** Sends a command and resolves with its answer, result or error. */
  send(method: string, params?: Record<string, unknown>, sessionId?: string): Promise<CdpAnswer>;
  /** Sends `text` as it is (a command the client library would not write) and resolves with the answer to `id`. */
  sendRaw(text: string, id: number): Promise<CdpAnswer>;
  /** Sends a command and resolves with its result; rejects with its error's message. */
  call(method: string, params?: Record<string, unknown>, sessionId?: string): Promise<Record<string, unknown>>;
  /** The first event of `method` at or after index `from` of `events`. */
  event(method: string, from?: number, ms?: number): Promise<CdpEvent>;
  close(): void;
}

export async function connectCdp(url: string, headers: Record<string, string>): Promise<CdpClient> {
  const socket = new WebSocket(url, { headers, perMessageDeflate: false });
  await new Promise((resolve, reject) => {
    socket.once("open", resolve);
    socket.once("error", reject);
    socket.once("unexpected-response", (_req, res) => reject(new Error(`upgrade answered ${res.statusCode}`)));
  });
  const events: CdpEvent[] = [];
  const waiting = new Map<number, (answer: CdpAnswer) => void>();
  let next = 1;
  const rejects = new Map<number, (error: Error) => void>();
  socket.once("close", () => {
    for (const reject of rejects.values()) reject(new Error("connection closed before the command was answered"));
  });
  socket.on("message", (data) => {
    const message = JSON.parse(data.toString());
    if (typeof message.id === "number" && waiting.has(message.id)) {
      waiting.get(message.id)!(message);
      waiting.delete(message.id);
    } else if (typeof message.method === "string") events.push(message);
  });
  const send = (method: string, params: Record<string, unknown> = {}, sessionId?: string) =>
    new Promise<CdpAnswer>((resolve, reject) => {
      const id = next++;
      waiting.set(id, (answer) => {
        rejects.delete(id);
        resolve(answer);
      });
      rejects.set(id, () => reject(new Error(`connection closed before ${method} was answered`)));
      socket.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    });
  return {
    socket,
    events,
    send,
    sendRaw: (text, id) =>
      new Promise<CdpAnswer>((resolve) => {
        waiting.set(id, resolve);
        socket.send(text);
      }),
    async call(method, params, sessionId) {
      const answer = await send(method, params, sessionId);
      if (answer.error) throw new Error(answer.error.message);
      return answer.result ?? {};
    },
    event: (method, from = 0, ms = 10_000) =>
      until(`the ${method} event`, () => events.slice(from).find((event) => event.method === method), ms),
    close: () => socket.close(),
  };
}
