// A raw HTTP/2 client for the site proxy's tests: TLS through a CONNECT tunnel to a synthetic name, then frames
// written by hand, so a test can send what node's and curl's clients refuse to (malformed streams, resets in the
// same write as their HEADERS, bodies shorter than they declare) and read every frame the proxy answers with.
import * as fs from "node:fs";
import * as tls from "node:tls";
import { connectThrough, type ProxyProcess } from "./helpers";
import { until } from "../helpers/until";

export const DATA = 0;
export const HEADERS = 1;
export const RST_STREAM = 3;
export const SETTINGS = 4;
export const GOAWAY = 7;
export const END_STREAM = 0x1;
export const END_HEADERS = 0x4;
export const PROTOCOL_ERROR = 1;
export const CANCEL = 8;

export interface Frame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
}

export function frame(type: number, flags: number, stream: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(stream, 5);
  return Buffer.concat([head, payload]);
}

/** HPACK literal fields without indexing, names and values as given (no Huffman): nothing is normalised. */
export function hpack(fields: [string, string][]): Buffer {
  const int7 = (n: number) => {
    if (n < 127) return Buffer.from([n]);
    const bytes = [127];
    n -= 127;
    while (n >= 128) {
      bytes.push((n % 128) + 128);
      n = Math.floor(n / 128);
    }
    bytes.push(n);
    return Buffer.from(bytes);
  };
  return Buffer.concat(
    fields.flatMap(([name, value]) => [
      Buffer.from([0]),
      int7(name.length),
      Buffer.from(name),
      int7(value.length),
      Buffer.from(value),
    ]),
  );
}

/** A HEADERS frame carrying `fields` whole (END_HEADERS), ending the stream when `endStream`. */
export function headersFrame(stream: number, fields: [string, string][], endStream: boolean): Buffer {
  return frame(HEADERS, END_HEADERS | (endStream ? END_STREAM : 0), stream, hpack(fields));
}

/** RST_STREAM with `code` (CANCEL, as a browser sends when it drops a request). */
export function resetFrame(stream: number, code = CANCEL): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(code);
  return frame(RST_STREAM, 0, stream, payload);
}

/** TLS through a CONNECT tunnel to `name`, offering `alpn`, trusting the env CA alone. */
export async function tunnelTls(
  through: ProxyProcess,
  name: string,
  alpn: string[],
  session?: Buffer,
): Promise<tls.TLSSocket> {
  const { socket, status } = await connectThrough(through.port, `${name}:443`);
  if (status !== 200) throw new Error(`CONNECT ${name}:443 was answered ${status}`);
  const secure = tls.connect({
    socket,
    servername: name,
    ca: fs.readFileSync(through.caCertPath, "utf8"),
    ALPNProtocols: alpn,
    ...(session ? { session } : {}),
  });
  await new Promise<void>((resolve, reject) => secure.once("secureConnect", resolve).once("error", reject));
  return secure;
}

/** One HTTP/2 connection written frame by frame; every frame the proxy sends is kept, its SETTINGS acknowledged. */
export interface RawH2 {
  secure: tls.TLSSocket;
  frames: Frame[];
  /** Writes the frames in one write. */
  send(...frames: Buffer[]): void;
  /** Resolves once a frame matches, or with undefined after `timeoutMs`. */
  waitForFrame(match: (f: Frame) => boolean, timeoutMs?: number): Promise<Frame | undefined>;
  close(): void;
}

export async function openRawH2(through: ProxyProcess, name: string): Promise<RawH2> {
  const secure = await tunnelTls(through, name, ["h2"]);
  if (secure.alpnProtocol !== "h2") throw new Error(`ALPN chose ${secure.alpnProtocol}, not h2`);
  secure.write(
    Buffer.concat([Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), frame(SETTINGS, 0, 0, Buffer.alloc(0))]),
  );
  const frames: Frame[] = [];
  let buffered = Buffer.alloc(0);
  secure.on("data", (d: Buffer) => {
    buffered = Buffer.concat([buffered, d]);
    while (buffered.length >= 9 && buffered.length >= 9 + buffered.readUIntBE(0, 3)) {
      const length = buffered.readUIntBE(0, 3);
      const f = {
        type: buffered[3],
        flags: buffered[4],
        stream: buffered.readUInt32BE(5) & 0x7fffffff,
        payload: buffered.subarray(9, 9 + length),
      };
      if (f.type === SETTINGS && !(f.flags & 1) && secure.writable)
        secure.write(frame(SETTINGS, 1, 0, Buffer.alloc(0)));
      frames.push(f);
      buffered = buffered.subarray(9 + length);
    }
  });
  secure.on("error", () => undefined);
  return {
    secure,
    frames,
    send: (...out) => void (secure.writable && secure.write(Buffer.concat(out))),
    waitForFrame: (match, timeoutMs = 1_500) =>
      until("a frame", () => frames.find(match), timeoutMs).catch(() => undefined),
    close: () => secure.destroy(),
  };
}

/** The pseudo-headers of a request for `path` at `name`. */
export function requestFields(method: string, name: string, path: string): [string, string][] {
  return [
    [":method", method],
    [":scheme", "https"],
    [":authority", name],
    [":path", path],
  ];
}

/**
 * Sends one HEADERS frame (END_STREAM) on stream 1 in a new h2 connection; the frames read until stream 1's answer or
 * reset (1.5 s at most).
 */
export async function rawH2(through: ProxyProcess, name: string, fields: [string, string][]): Promise<Frame[]> {
  const h2 = await openRawH2(through, name);
  h2.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, hpack(fields)));
  await h2.waitForFrame((f) => (f.stream === 1 && (f.type === HEADERS || f.type === RST_STREAM)) || f.type === GOAWAY);
  h2.close();
  return h2.frames;
}
