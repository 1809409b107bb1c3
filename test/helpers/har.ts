// Checking a HAR document against the published HAR 1.2 JSON schema (har-schema, through har-validator's ajv set-up),
// so a test fails on anything a HAR consumer could reject.
import { createRequire } from "node:module";

const require = createRequire(__filename);
const validator = require("har-validator/lib/promise") as { har(data: unknown): Promise<unknown> };

/** The schema's complaints about `document` (each `<path> <message>`), none when it is a valid HAR 1.2 document. */
export async function harProblems(document: unknown): Promise<string[]> {
  try {
    await validator.har(document);
    return [];
  } catch (err) {
    const errors = (err as { errors?: { dataPath?: string; instancePath?: string; message?: string }[] }).errors;
    if (!errors) throw err;
    return errors.map((e) => `${e.dataPath ?? e.instancePath ?? ""} ${e.message ?? ""}`.trim());
  }
}
