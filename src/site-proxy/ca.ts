// The env's certificate authority and the leaf certificates it issues for synthetic names.
// A browser that trusts the CA loads https://<synthetic name>/ through the proxy without a certificate error;
// the proxy issues a leaf for exactly the name the browser asked for, on first use, and keeps the most recently
// used ones (a computer asking for a million names under a synthetic wildcard must not grow the proxy's memory).
// @peculiar/x509 resolves its parts through tsyringe, which needs the Reflect metadata polyfill loaded first.
import "reflect-metadata";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import * as tls from "node:tls";
import * as x509 from "@peculiar/x509";

x509.cryptoProvider.set(crypto.webcrypto as never);
type CryptoKey = crypto.webcrypto.CryptoKey;
type CryptoKeyPair = crypto.webcrypto.CryptoKeyPair;
type SigningAlgorithm = crypto.webcrypto.EcdsaParams | crypto.webcrypto.RsaHashedImportParams;
const subtle = crypto.webcrypto.subtle;

// ECDSA P-256: keys are generated and certificates signed in well under a millisecond.
const EC_KEY = { name: "ECDSA", namedCurve: "P-256" } as const;
const EC_SIGN = { name: "ECDSA", hash: "SHA-256" } as const;
const DAY_MS = 24 * 60 * 60 * 1000;

/** Leaves kept at most: far more names than a task's pages use, a few MiB of TLS contexts. */
export const MAX_CACHED_LEAVES = 1_000;

export interface CertificateAuthority {
  /** PEM of the CA certificate, what browsers trust. */
  certPem: string;
  /** Where the CA certificate is on disk. */
  certPath: string;
  /** A TLS context with a certificate for exactly `host`, issued on first use and cached. */
  contextFor(host: string): Promise<tls.SecureContext>;
  /** How many leaves are cached now. */
  cachedLeaves(): number;
}

function randomSerial(): string {
  const bytes = crypto.randomBytes(16);
  bytes[0] &= 0x7f; // a positive serial number
  return bytes.toString("hex");
}

async function privateKeyPem(key: CryptoKey): Promise<string> {
  const der = Buffer.from(await subtle.exportKey("pkcs8", key));
  return `-----BEGIN PRIVATE KEY-----\n${der
    .toString("base64")
    .replace(/(.{64})/g, "$1\n")
    .replace(/\n$/, "")}\n-----END PRIVATE KEY-----\n`;
}

/** Imports a CA key written by us (ECDSA) or by someone else (ECDSA P-256/P-384 or RSA). */
async function importSigningKey(pem: string): Promise<{ key: CryptoKey; algorithm: SigningAlgorithm }> {
  const keyObject = crypto.createPrivateKey(pem);
  const der = keyObject.export({ type: "pkcs8", format: "der" });
  if (keyObject.asymmetricKeyType === "ec") {
    const curve = keyObject.asymmetricKeyDetails?.namedCurve === "secp384r1" ? "P-384" : "P-256";
    const key = await subtle.importKey("pkcs8", der, { name: "ECDSA", namedCurve: curve }, false, ["sign"]);
    return { key, algorithm: { name: "ECDSA", hash: curve === "P-384" ? "SHA-384" : "SHA-256" } };
  }
  if (keyObject.asymmetricKeyType === "rsa") {
    const algorithm = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" };
    return { key: await subtle.importKey("pkcs8", der, algorithm, false, ["sign"]), algorithm };
  }
  throw new Error(`the CA key is ${keyObject.asymmetricKeyType}; use an ECDSA or RSA key`);
}

async function generateCa(): Promise<{ certPem: string; keyPem: string }> {
  const keys = (await subtle.generateKey(EC_KEY, true, ["sign", "verify"])) as CryptoKeyPair;
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: `CN=multienv env CA ${crypto.randomBytes(4).toString("hex")}, O=multienv`,
    notBefore: new Date(now - DAY_MS),
    notAfter: new Date(now + 10 * 365 * DAY_MS),
    signingAlgorithm: EC_SIGN,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString("pem") + "\n", keyPem: await privateKeyPem(keys.privateKey) };
}

function writeFile(file: string, text: string, mode: number): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text, { mode });
  fs.chmodSync(file, mode); // writeFileSync's mode applies only to a new file
}

/**
 * Loads the CA from `ca` when its files exist; otherwise generates one and writes it there (the key 0600), so a
 * restarted proxy keeps its CA and the browser keeps trusting it. Without `ca` the CA lives only as long as the
 * process, and its certificate is written to `defaultCertPath`.
 */
export async function loadOrCreateCa(
  ca: { cert: string; key: string } | undefined,
  defaultCertPath: string,
  maxCachedLeaves = MAX_CACHED_LEAVES,
): Promise<CertificateAuthority> {
  let certPem: string;
  let keyPem: string;
  let certPath: string;
  if (ca && fs.existsSync(ca.cert) && fs.existsSync(ca.key)) {
    certPem = fs.readFileSync(ca.cert, "utf8");
    keyPem = fs.readFileSync(ca.key, "utf8");
    certPath = ca.cert;
  } else {
    ({ certPem, keyPem } = await generateCa());
    certPath = ca ? ca.cert : defaultCertPath;
    if (ca) writeFile(ca.key, keyPem, 0o600);
    writeFile(certPath, certPem, 0o644);
  }
  const caCert = new x509.X509Certificate(certPem);
  const signing = await importSigningKey(keyPem);
  const authorityKeyId = await x509.AuthorityKeyIdentifierExtension.create(caCert);
  // One leaf key for every leaf: each name still gets its own certificate, and issuing one is a single signature.
  const leafKeys = (await subtle.generateKey(EC_KEY, true, ["sign", "verify"])) as CryptoKeyPair;
  const leafKeyPem = await privateKeyPem(leafKeys.privateKey);
  const leafKeyId = await x509.SubjectKeyIdentifierExtension.create(leafKeys.publicKey);
  // Least recently used first: a Map keeps insertion order, and a name used again is moved to the end.
  const contexts = new Map<string, Promise<tls.SecureContext>>();

  async function issue(host: string): Promise<tls.SecureContext> {
    const now = Date.now();
    const leaf = await x509.X509CertificateGenerator.create({
      serialNumber: randomSerial(),
      subject: `CN=${host}`,
      issuer: caCert.subject,
      notBefore: new Date(now - DAY_MS),
      notAfter: new Date(now + 365 * DAY_MS),
      signingAlgorithm: signing.algorithm,
      publicKey: leafKeys.publicKey as never,
      signingKey: signing.key as never,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.SubjectAlternativeNameExtension([{ type: "dns", value: host }]),
        leafKeyId,
        authorityKeyId,
      ],
    });
    return tls.createSecureContext({ key: leafKeyPem, cert: leaf.toString("pem") + "\n" + certPem });
  }

  return {
    certPem,
    certPath,
    contextFor(host) {
      let context = contexts.get(host);
      if (context) {
        contexts.delete(host);
      } else {
        context = issue(host);
        // a failed issue is tried again next time
        context.catch(() => contexts.get(host) === context && contexts.delete(host));
      }
      contexts.set(host, context);
      while (contexts.size > maxCachedLeaves) contexts.delete(contexts.keys().next().value!);
      return context;
    },
    cachedLeaves: () => contexts.size,
  };
}
