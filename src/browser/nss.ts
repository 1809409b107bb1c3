// Trusting the env CA: Chromium on Linux reads its trust store from the NSS database
// in $HOME/.pki/nssdb, so the CA is imported there (certutil, libnss3-tools) before launch.
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);
const NICKNAME = "multienv-env-ca";

export function nssDirOf(home: string): string {
  return path.join(home, ".pki", "nssdb");
}

/** Imports `caFile` as a trusted CA for TLS servers into the NSS db under `home`, replacing an earlier import. */
export async function trustCa(caFile: string, home: string, certutil = "certutil"): Promise<void> {
  const dir = nssDirOf(home);
  const db = `sql:${dir}`;
  if (!fs.existsSync(path.join(dir, "cert9.db"))) {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    await run(certutil, ["-N", "-d", db, "--empty-password"]);
  }
  // A restarted proxy keeps its CA, but a redeployed one may not: always import the current file.
  await run(certutil, ["-D", "-d", db, "-n", NICKNAME]).catch(() => undefined);
  await run(certutil, ["-A", "-d", db, "-n", NICKNAME, "-t", "C,,", "-i", caFile]);
}
