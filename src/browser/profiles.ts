// A computer's browser profiles: `profiles/<n>` under the launcher's home, each a Chromium's HOME (its NSS trust store
// at .pki/nssdb, its downloads, caches and temporary files) with its user data in `chromium/`. Everything an episode
// could leave on the browser's disk is in its profile, and is deleted with it. A standby's profile (a Chromium
// started ahead of a fresh profile, never used yet) is marked as such until it is promoted, so that a launcher that
// starts again goes on with the profile that was in use, never with one no episode has seen nor with an older one.
import fs from "node:fs";
import path from "node:path";
import { USER_DATA_DIR } from "./chromium";
import { trustCaByCopy } from "./nss";

const PROFILES_DIR = "profiles";
/** The NSS db trusting the env CA that each profile's is copied from (a HOME of its own, outside every profile). */
const NSS_TEMPLATE_DIR = "nss-template";
/** In a standby's profile until it is promoted. */
const STANDBY_MARK = ".multienv-standby";
/** What a Chromium killed with -9 leaves in its user data, and the port file of its last run: the profile is ours. */
const LEFT_BY_A_RUN = ["SingletonLock", "SingletonSocket", "SingletonCookie", "DevToolsActivePort"];
const RM = { recursive: true, force: true, maxRetries: 10, retryDelay: 50 } as const;

export class Profiles {
  private readonly dir: string;
  /** The highest number given out: a number is never given twice, even once its profile is deleted. */
  private highest = 0;

  constructor(
    private readonly home: string,
    private readonly caFile: string,
    private readonly certutil?: string,
  ) {
    this.dir = path.join(home, PROFILES_DIR);
  }

  /** The profiles there are, by number, oldest first. */
  numbers(): number[] {
    const names = fs.existsSync(this.dir) ? fs.readdirSync(this.dir) : [];
    return names
      .filter((n) => /^[1-9][0-9]*$/.test(n))
      .map(Number)
      .sort((a, b) => a - b);
  }

  root(profile: number): string {
    return path.join(this.dir, String(profile));
  }

  /**
   * At the launcher's start: the newest profile that was in use (a restarted container goes on with it), every other
   * deleted (what an interrupted fresh profile left, and any standby's); 1 when there is none.
   */
  resume(): number {
    const inUse = this.numbers().filter((n) => !fs.existsSync(path.join(this.root(n), STANDBY_MARK)));
    const profile = inUse.at(-1) ?? 1;
    this.highest = Math.max(profile, ...this.numbers());
    for (const n of this.numbers()) if (n !== profile) fs.rmSync(this.root(n), { recursive: true, force: true });
    return profile;
  }

  /** A number above every profile there is, was, and `above`. */
  next(above: number): number {
    this.highest = Math.max(this.highest, above, ...this.numbers()) + 1;
    return this.highest;
  }

  /**
   * Makes a profile ready for a Chromium to start on: its directories, the env CA trusted (resolving with the CA's
   * bytes), what an earlier run left removed; a standby's is marked until markInUse.
   */
  async prepare(profile: number, standby: boolean): Promise<Buffer> {
    const root = this.root(profile);
    const userData = path.join(root, USER_DATA_DIR);
    for (const dir of [userData, path.join(root, "tmp")]) fs.mkdirSync(dir, { recursive: true });
    if (standby) fs.writeFileSync(path.join(root, STANDBY_MARK), "");
    for (const f of LEFT_BY_A_RUN) fs.rmSync(path.join(userData, f), { force: true });
    return trustCaByCopy(this.caFile, root, path.join(this.home, NSS_TEMPLATE_DIR), this.certutil);
  }

  /** A standby's profile becomes the one in use. */
  markInUse(profile: number): void {
    fs.rmSync(path.join(this.root(profile), STANDBY_MARK), { force: true });
  }

  async remove(profile: number): Promise<void> {
    await fs.promises.rm(this.root(profile), RM);
  }

  /** Deletes every profile but those in `keep` (no process of theirs may be left to write to them). */
  async removeAllBut(keep: readonly number[]): Promise<void> {
    await Promise.all(this.numbers().map((n) => (keep.includes(n) ? undefined : this.remove(n))));
  }
}
