// Every socket the proxy holds for its computer, both sides, so an episode can end them all at once: a browser
// keeps idle connections open long after its pages are gone, and a connection's log line is written only when it
// closes. Ending them is how a reset makes the finished episode's log complete without restarting the browser.
import type * as net from "node:net";

export class OpenConnections {
  private readonly sockets = new Set<net.Socket>();

  /** Holds `socket` until it closes. */
  track(socket: net.Socket): void {
    if (socket.destroyed) return;
    this.sockets.add(socket);
    socket.once("close", () => this.sockets.delete(socket));
  }

  /** Ends every open socket and resolves, with how many there were, once each has closed (its log line written). */
  async endAll(): Promise<number> {
    const open = [...this.sockets];
    await Promise.all(
      open.map(
        (socket) =>
          new Promise<void>((resolve) => {
            if (socket.closed) return resolve();
            socket.once("close", () => resolve());
            socket.destroy();
          }),
      ),
    );
    return open.length;
  }
}
