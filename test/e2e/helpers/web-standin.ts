// The stand-in for the real web (test/e2e/fixtures/web-standin.cjs): a test CA and a leaf for the
// stand-in's names made with openssl, and the container under those names on an "internet" network of the test's
// own. That network's subnet is a public range (a site proxy under an allowlist dials no private address) and is
// not one of the env's networks (which every proxy refuses); the proxies that reach the web are connected to it,
// as their egress would reach the real web.
//
// Trust: a computer's browser trusts only the env CA. For live hosts (tunnelled straight to the
// "real" site) the stand-in's certificate must be trusted too, so the test CA is added to the
// browser's NSS db with `docker exec ... certutil` and Chromium is restarted (the launcher brings it
// back, re-opening its start tabs), as a user would install a corporate CA in a real computer.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type Docker from "dockerode";

/**
 * The label of the stack's own pieces (src/protocol/labels.ts LABELS.stack): the stand-in goes with the stack's sweep.
 */
const STACK_LABEL = "multienv.stack";

export const STANDIN_HOSTS = ["github.com", "gist.github.com", "example.com"];

export interface StandinCerts {
  dir: string;
  caPem: string;
}

export function makeStandinCerts(): StandinCerts {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "multienv-standin-"));
  const run = (args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  run([
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-keyout",
    "ca-key.pem",
    "-out",
    "ca.pem",
    "-days",
    "2",
    "-subj",
    "/CN=multienv e2e web stand-in CA",
  ]);
  run(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem", "-out", "leaf.csr", "-subj", "/CN=github.com"]);
  const san = STANDIN_HOSTS.map((h) => `DNS:${h}`).join(",") + ",DNS:*.github.com,DNS:*.githubassets.com";
  fs.writeFileSync(
    path.join(dir, "ext.cnf"),
    `subjectAltName=${san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n`,
  );
  run([
    "x509",
    "-req",
    "-in",
    "leaf.csr",
    "-CA",
    "ca.pem",
    "-CAkey",
    "ca-key.pem",
    "-CAcreateserial",
    "-out",
    "cert.pem",
    "-days",
    "2",
    "-extfile",
    "ext.cnf",
  ]);
  fs.copyFileSync(path.join(__dirname, "../fixtures/web-standin.cjs"), path.join(dir, "web-standin.cjs"));
  fs.chmodSync(dir, 0o755);
  for (const f of fs.readdirSync(dir)) fs.chmodSync(path.join(dir, f), 0o644);
  // Its WebSocket echo's library (no dependencies of its own), where the stand-in's require finds it.
  fs.cpSync(path.dirname(require.resolve("ws/package.json")), path.join(dir, "node_modules", "ws"), {
    recursive: true,
  });
  execFileSync("chmod", ["-R", "a+rX", path.join(dir, "node_modules")]);
  return { dir, caPem: fs.readFileSync(path.join(dir, "ca.pem"), "utf8") };
}

let internets = 0;

/**
 * A public /24 for one stack's internet network: Docker refuses two networks with overlapping subnets, so each
 * test process (and each stack in it) gets its own. 11.0.0.0/8 is public unicast, not a private or reserved range.
 */
function internetSubnet(): string {
  internets += 1;
  return `11.${10 + (process.pid % 200)}.${internets % 250}.0/24`;
}

/**
 * Creates `<stack>-internet` and starts the stand-in on it answering to STANDIN_HOSTS; labelled for the stack's sweep.
 * `image`: any image with node on the engine (default multienv/node-base). `remote`: the engine is a remote host's,
 * where the gateway reaches the proxies at their published ports: the network is then named so that it sorts after
 * the proxies' egress networks, since Docker (before API 1.48's gateway priority) gives a container its default
 * route from the first of its networks by name, and a reply leaving by the stand-in's network would never reach the
 * gateway.
 */
export async function startWebStandin(
  api: Docker,
  stack: string,
  certs: StandinCerts,
  options: { image?: string; remote?: boolean } = {},
): Promise<{ network: string; id: string }> {
  const image = options.image ?? "multienv/node-base";
  const network = options.remote ? `zz-${stack}-internet` : `${stack}-internet`;
  await api.createNetwork({
    Name: network,
    Driver: "bridge",
    Labels: { [STACK_LABEL]: stack },
    IPAM: { Config: [{ Subnet: internetSubnet() }] },
  });
  const name = `${stack}-web-standin`;
  const created = await api.createContainer({
    name,
    Image: image,
    Entrypoint: ["node"],
    Cmd: ["/standin/web-standin.cjs"],
    Env: ["STANDIN_CERT=/standin/cert.pem", "STANDIN_KEY=/standin/key.pem"],
    Labels: { [STACK_LABEL]: stack, "multienv.role": "web-standin" },
    HostConfig: { Binds: [`${certs.dir}:/standin:ro`], NetworkMode: network },
    NetworkingConfig: { EndpointsConfig: { [network]: { Aliases: STANDIN_HOSTS } } },
  });
  await created.start();
  return { network, id: created.id };
}

/** Connects a container (a site proxy that reaches the web) to the stack's internet network. */
export async function connectToInternet(api: Docker, network: string, container: string): Promise<void> {
  await api.getNetwork(network).connect({ Container: container });
}

/**
 * Adds the stand-in's CA to a browser container's NSS dbs (Chromium reads its db when it starts): the current
 * profile's, and the template every fresh profile's is copied from (the launcher builds it again only when the env
 * CA changes), so the browser trusts the stand-in after a reset too.
 */
export function trustInBrowser(browserContainer: string, caPem: string, host?: string): void {
  execFileSync(
    "docker",
    [...(host === undefined ? [] : ["-H", host]), "exec", "-i", browserContainer, "sh", "-c", TRUST_SCRIPT],
    { input: caPem, stdio: ["pipe", "pipe", "pipe"] },
  );
}

/** The shell script trustInBrowser runs in a browser's container, the CA's PEM on its stdin. */
export const TRUST_SCRIPT = [
  "set -e",
  "ca=$(mktemp)",
  'cat > "$ca"',
  'for db in "$HOME"/nss-template/.pki/nssdb "$HOME"/profiles/*/.pki/nssdb; do',
  '  [ -f "$db/cert9.db" ] || continue',
  '  certutil -A -d "sql:$db" -n multienv-e2e-web-standin -t C,, -a -i "$ca"',
  "done",
].join("\n");
