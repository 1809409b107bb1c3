// The messages a viewer of `multienv watch`'s live channel reads, as the page reads them: JSON text, and each frame a
// binary message (watch-feeds.ts), read back into `{type: "frame", computer, data}` with the JPEG as base64.
import type { WebSocket } from "ws";
import { readWatchMessage, type WatchMessage } from "../../src/runner/operator/watch-feeds";

/** Collects what `socket` is sent; a frame is named by the computers of the greeting before it. */
export function watchMessages(socket: WebSocket): WatchMessage[] {
  const messages: WatchMessage[] = [];
  let computers: string[] = [];
  socket.on("message", (data: Buffer, isBinary: boolean) => {
    const message = readWatchMessage(data, isBinary, computers);
    if (message?.type === "hello") computers = message.computers;
    if (message !== undefined) messages.push(message);
  });
  return messages;
}
