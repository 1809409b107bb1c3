// The address ranges that are not the public web, in one list: the site proxy's address check
// (src/protocol/address-check.ts) refuses them, and the kubernetes egress policies leave them out
// (src/plan/targets/kubernetes.ts).
//
// The rows are IANA's IPv4 and IPv6 Special-Purpose Address Registries' (RFC 6890 and its updates), every one whose
// "Globally Reachable" is False or N/A (deprecated), a row holding globally reachable rows within it taken whole (the
// anycast services in 192.0.0.0/24 and 2001::/23 are no websites); the IPv4 multicast range (IANA's multicast
// registry); and, from the IPv6 Address Space registry, everything outside 2000::/3 (Global Unicast), which the IETF
// reserves or gives to unique-local, link-local and multicast use. Cloud metadata addresses are beside them
// (METADATA_CIDRS): some are on public addresses.
//
// An IPv6 address that carries an IPv4 address is judged by it (embeddedIpv4): IPv4-mapped (the kernel dials the
// IPv4 address), IPv4-translated (SIIT), NAT64's well-known prefix 64:ff9b::/96 (the network translates it), and
// the deprecated 6to4 (2002::/16) and IPv4-compatible (::/96) forms, which stay refused as rows of their own even
// when the IPv4 address inside is public. Teredo (2001::/32) is refused whole: its client address is obfuscated and
// its server is a relay. NAT64's local-use prefix 64:ff9b:1::/48 is refused whole: where the IPv4 address sits in it
// is the network's choice.
import ipaddr from "ipaddr.js";

export type Address = ipaddr.IPv4 | ipaddr.IPv6;

/**
 * What a non-public range is to the site proxy:
 * - `never`: no computer dials it, whatever `allowAddresses` says (unspecified, link-local, multicast, broadcast);
 * - `loopback`: refused unless `allowAddresses` opens it (a test's origin);
 * - `private`: private-use and shared networks, dialled by an allow-all computer (the env's own are in its `deny`);
 * - `special`: the rest: no website is there.
 */
export type RangeKind = "never" | "loopback" | "private" | "special";

export interface NonPublicRange {
  cidr: string;
  kind: RangeKind;
  /** How a refusal names it. */
  name: string;
}

const row = (cidr: string, kind: RangeKind, name: string): NonPublicRange => ({ cidr, kind, name });
const special = (cidr: string, what: string) => row(cidr, "special", `a special-purpose address (${cidr}, ${what})`);
const outsideGlobalUnicast = (cidr: string) =>
  row(cidr, "special", `an IPv6 address outside global unicast (2000::/3; ${cidr} is reserved by the IETF)`);

/** Every IPv4 range that is not the public web. */
export const NON_PUBLIC_IPV4: readonly NonPublicRange[] = [
  row("0.0.0.0/8", "never", "an unspecified address (0.0.0.0/8, this network)"),
  row("10.0.0.0/8", "private", "a private address (10.0.0.0/8)"),
  row("100.64.0.0/10", "private", "a shared address (100.64.0.0/10)"),
  row("127.0.0.0/8", "loopback", "a loopback address"),
  row("169.254.0.0/16", "never", "a link-local address"),
  row("172.16.0.0/12", "private", "a private address (172.16.0.0/12)"),
  special("192.0.0.0/24", "IETF protocol assignments"),
  special("192.0.2.0/24", "documentation, TEST-NET-1"),
  special("192.88.99.0/24", "deprecated 6to4 relay anycast"),
  row("192.168.0.0/16", "private", "a private address (192.168.0.0/16)"),
  special("198.18.0.0/15", "benchmarking"),
  special("198.51.100.0/24", "documentation, TEST-NET-2"),
  special("203.0.113.0/24", "documentation, TEST-NET-3"),
  row("224.0.0.0/4", "never", "a multicast address"),
  special("240.0.0.0/4", "reserved"),
  row("255.255.255.255/32", "never", "the broadcast address"),
];

/** Every IPv6 range that is not the public web. */
export const NON_PUBLIC_IPV6: readonly NonPublicRange[] = [
  outsideGlobalUnicast("::/3"),
  outsideGlobalUnicast("4000::/2"),
  outsideGlobalUnicast("8000::/1"),
  row("::/128", "never", "an unspecified address"),
  row("::1/128", "loopback", "a loopback address"),
  special("::/96", "deprecated IPv4-compatible"),
  special("64:ff9b:1::/48", "NAT64 local-use"),
  special("100::/64", "discard-only"),
  special("100:0:0:1::/64", "dummy prefix"),
  special("2001::/23", "IETF protocol assignments"),
  special("2001::/32", "Teredo"),
  special("2001:2::/48", "benchmarking"),
  special("2001:db8::/32", "documentation"),
  special("2002::/16", "deprecated 6to4"),
  special("3fff::/20", "documentation"),
  special("5f00::/16", "segment routing SIDs"),
  row("fc00::/7", "private", "a private (unique local) address (fc00::/7)"),
  row("fe80::/10", "never", "a link-local address"),
  row("ff00::/8", "never", "a multicast address"),
];

/** Cloud metadata and host-agent addresses (AWS IMDS and ECS, AWS Nitro's IPv6 services, Alibaba, Azure). */
export const METADATA_CIDRS: readonly string[] = [
  "169.254.169.254/32",
  "169.254.170.2/32",
  "fd00:ec2::/32",
  "100.100.100.200/32",
  "168.63.129.16/32",
];

type Parsed = { range: NonPublicRange; cidr: [Address, number] };
const parsed: Parsed[] = [...NON_PUBLIC_IPV4, ...NON_PUBLIC_IPV6].map((range) => ({
  range,
  cidr: ipaddr.parseCIDR(range.cidr),
}));

function within(address: Address, [base, bits]: [Address, number]): boolean {
  return address.kind() === base.kind() && address.match(base, bits);
}

/** The most specific non-public range holding `address`, or undefined for an address of the public web. */
export function nonPublicRange(address: Address): NonPublicRange | undefined {
  let best: Parsed | undefined;
  for (const entry of parsed)
    if (within(address, entry.cidr) && (best === undefined || entry.cidr[1] > best.cidr[1])) best = entry;
  return best?.range;
}

/** True for a cloud metadata address. */
export function isMetadataAddress(address: Address): boolean {
  return METADATA_CIDRS.some((cidr) => within(address, ipaddr.parseCIDR(cidr)));
}

/** IPv6 forms whose destination is the IPv4 address inside them: it alone is judged. */
const TRANSLATED = ["::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96"].map((c) => ipaddr.parseCIDR(c));
/** Deprecated IPv6 forms carrying an IPv4 address: it is judged, and the form is refused anyway. */
const TUNNELLED = ["::/96"].map((c) => ipaddr.parseCIDR(c));
const SIX_TO_FOUR = ipaddr.parseCIDR("2002::/16");

/**
 * The IPv4 address an IPv6 address carries, and whether it alone decides (`translated`: connecting to the IPv6 form
 * reaches it) or the IPv6 form is refused too (`tunnelled`: 6to4, IPv4-compatible).
 */
export function embeddedIpv4(address: ipaddr.IPv6): { ipv4: ipaddr.IPv4; translated: boolean } | undefined {
  const bytes = address.toByteArray();
  if (TRANSLATED.some((cidr) => within(address, cidr)))
    return { ipv4: new ipaddr.IPv4(bytes.slice(12)), translated: true };
  if (within(address, SIX_TO_FOUR)) return { ipv4: new ipaddr.IPv4(bytes.slice(2, 6)), translated: false };
  // :: and ::1 are IPv6's own; any other address in ::/96 is an IPv4-compatible one.
  if (TUNNELLED.some((cidr) => within(address, cidr)) && bytes.slice(0, 14).some((b) => b !== 0))
    return { ipv4: new ipaddr.IPv4(bytes.slice(12)), translated: false };
  return undefined;
}

/** `cidrs` without those another of them holds: the same addresses, listed once. */
function outermost(cidrs: readonly string[]): string[] {
  const all = cidrs.map((c) => ({ text: c, cidr: ipaddr.parseCIDR(c) }));
  return all
    .filter(
      (a, i) =>
        !all.some(
          (b, j) =>
            j !== i && within(a.cidr[0], b.cidr) && (b.cidr[1] < a.cidr[1] || (b.cidr[1] === a.cidr[1] && j < i)),
        ),
    )
    .map((a) => a.text);
}

/**
 * The non-public ranges as a network policy can hold them, each address once: the rows, the metadata addresses, and
 * the IPv6 forms of IPv4 addresses whole, since a policy cannot look inside an address. None of them is an
 * IPv4-mapped range: that is a socket API's spelling, never a packet's destination, and the Kubernetes API refuses it
 * in a policy.
 */
export const NON_PUBLIC_CIDRS: { ipv4: readonly string[]; ipv6: readonly string[] } = (() => {
  const all = [...NON_PUBLIC_IPV4, ...NON_PUBLIC_IPV6].map((r) => r.cidr).concat(METADATA_CIDRS, "64:ff9b::/96");
  const cidrs = outermost(all);
  return { ipv4: cidrs.filter((c) => !c.includes(":")), ipv6: cidrs.filter((c) => c.includes(":")) };
})();
