// A recorded WebSocket played back: the server's frames (`receive` in the browser's recording) sent in recorded
// order, each once the client has sent the frame that preceded it in the recording; those before any client frame
// at once. What the client sends is not compared (a chat's text or a token may differ); its count paces the replay.
// Once the recording runs out the connection stays open, as the live server's did, until the client closes it.
import type { WebSocket } from "ws";
import type { WebSocketMessage } from "./recording";

const TEXT = 1;
const BINARY = 2;

/**
 * Plays `messages` on `socket`; `onError` hears what broke the connection. A message over the server's limit is
 * ws's to refuse: it closes the connection with 1009 itself, so the close frame is left to go out.
 */
export function playWebSocket(
  socket: WebSocket,
  messages: readonly WebSocketMessage[],
  onError: (error: Error & { code?: string }) => void,
): void {
  // Only data frames: control frames (close, ping, pong) are the connection's own.
  const frames = messages.filter((m) => m.opcode === TEXT || m.opcode === BINARY);
  let next = 0;
  const sendServerFrames = () => {
    while (next < frames.length && frames[next].type === "receive") {
      const frame = frames[next++];
      // Chromium records a binary frame's payload in base64.
      if (frame.opcode === BINARY) socket.send(Buffer.from(frame.data, "base64"), { binary: true });
      else socket.send(frame.data, { binary: false });
    }
  };
  socket.on("message", () => {
    if (next < frames.length && frames[next].type === "send") next += 1;
    sendServerFrames();
  });
  socket.on("error", (error: Error & { code?: string }) => {
    onError(error);
    if (error.code !== "WS_ERR_UNSUPPORTED_MESSAGE_LENGTH") socket.terminate();
  });
  sendServerFrames();
}
