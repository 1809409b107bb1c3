// Chromium binds DevTools to 127.0.0.1 only (it ignores --remote-debugging-address in headless mode), so the
// container's DevTools port is this TCP relay to it, listening on the browser's address on its computer's network
// alone: the one peer there is the computer's site proxy, whose control listener requires a token. The relay
// outlives Chromium restarts; a connection made while Chromium is down is closed at once.
import net from "node:net";

/** `target` gives the running Chromium's DevTools port, or undefined while none runs. */
export function startDevtoolsRelay(
  listen: { host: string; port: number },
  target: () => number | undefined,
): Promise<net.Server> {
  const server = net.createServer((client) => {
    const port = target();
    if (port === undefined) return void client.destroy();
    const upstream = net.connect({ host: "127.0.0.1", port });
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end);
    upstream.on("error", end);
    client.on("close", end);
    upstream.on("close", end);
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(listen.port, listen.host, () => resolve(server));
  });
}
