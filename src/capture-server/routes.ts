// Where a capture server request goes, decided from its request-target exactly as received: a name is one segment
// (no `/`, no escaped slash, no dot segment a client would have normalised away), decoded once.
import { decodeName } from "../service-kit/path-segment";
import { CAPTURE_SERVER_HEALTH_PATH, CAPTURE_SERVER_LIST_PATH } from "../protocol/traffic";

export type CaptureServerRoute =
  | { kind: "list" }
  | { kind: "file"; name: string }
  | { kind: "health" }
  | { kind: "bad"; error: string }
  | { kind: "not-found" };

const FILE_PREFIX = `${CAPTURE_SERVER_LIST_PATH}/`;

export function route(target: string): CaptureServerRoute {
  if (!target.startsWith("/")) return { kind: "bad", error: "request-target must be a path (origin form)" };
  const query = target.indexOf("?");
  const path = query === -1 ? target : target.slice(0, query);
  if (path === CAPTURE_SERVER_LIST_PATH) return { kind: "list" };
  if (path === CAPTURE_SERVER_HEALTH_PATH) return { kind: "health" };
  if (path.startsWith(FILE_PREFIX)) {
    const segment = path.slice(FILE_PREFIX.length);
    const name = segment.includes("/") ? undefined : decodeName(segment);
    return name === undefined ? { kind: "bad", error: "not a capture file name" } : { kind: "file", name };
  }
  return { kind: "not-found" };
}
