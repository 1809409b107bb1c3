// Ports on loopback: one free to listen on now, and one where nothing listens (a connection to it is refused).
import net from "node:net";

/** A port nothing listens on at this moment, on `host`: the kernel's pick, given back at once. */
export async function freePort(host = "127.0.0.1"): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((done, fail) => server.once("error", fail).listen(0, host, done));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((done) => server.close(done));
  return port;
}

/** A port where nothing listens (connections are refused). */
export const closedPort = freePort;
