// A path segment of a request-target as the services read a name from it (a site, a computer, a capture file):
// decoded once, and refused when it holds an escaped slash, so no name can smuggle a path.

const ESCAPED_SLASH = /%(2f|5c)/i;

/** A path segment decoded, or undefined when it holds an escaped slash (either way) or a bad escape. */
export function decodeName(segment: string): string | undefined {
  if (ESCAPED_SLASH.test(segment)) return undefined;
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}
