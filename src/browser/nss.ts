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

/**
 * Makes the NSS db under `home` trust `caFile` by copying one built under `templateHome`, which is built again only
 * when the CA changed: a fresh profile then costs a copy, not three runs of certutil. Resolves with the CA's bytes it
 * trusts, so that a profile prepared ahead of its use can be told from one trusting a CA replaced since.
 */
export async function trustCaByCopy(
  caFile: string,
  home: string,
  templateHome: string,
  certutil = "certutil",
): Promise<Buffer> {
  const template = nssDirOf(templateHome);
  const built = path.join(template, "multienv-ca.pem");
  const ca = fs.readFileSync(caFile);
  if (!(fs.existsSync(built) && fs.readFileSync(built).equals(ca))) {
    // The bytes read are the ones imported and recorded, whatever the file holds by then.
    fs.rmSync(built, { force: true });
    fs.mkdirSync(template, { recursive: true, mode: 0o700 });
    const pending = `${built}.pending`;
    fs.writeFileSync(pending, ca);
    await trustCa(pending, templateHome, certutil);
    fs.renameSync(pending, built);
  }
  fs.cpSync(template, nssDirOf(home), { recursive: true });
  return ca;
}
