// Which addresses the proxy may dial for a computer: the check made on every address a host stands for, after
// resolution, before a connection is attempted. The ranges themselves come from ipaddr.js (the IANA special-purpose
// registries); what is written here is only which of them each reach mode refuses.
//
// - Every mode: the env's own networks (`deny`), loopback, link-local, cloud metadata addresses, unspecified,
//   multicast and broadcast addresses, also when written as IPv4-mapped or NAT64 IPv6, and any address with an
//   IPv6 zone id (which names an interface of the proxy's own machine).
// - An allowlist also: private, shared (100.64/10) and reserved/special-purpose addresses, and IPv6 outside
//   global unicast (2000::/3).
// - `allowAddresses` lets an operator dial loopback, private, shared or reserved ranges all the same (a test's
//   origin on loopback, a stand-in for the web on a private network); `deny`, link-local, metadata, unspecified,
//   multicast and broadcast addresses stay refused whatever it says.
import ipaddr from "ipaddr.js";

type Address = ipaddr.IPv4 | ipaddr.IPv6;
type Cidr = [Address, number];

export interface AddressRules {
  reach: "allow-all" | "none" | string[];
  /** CIDRs of the env's own networks. */
  deny?: string[];
  /** CIDRs that may be dialled although they are loopback, private, shared or reserved. */
  allowAddresses?: string[];
}

/** Why the address may not be dialled, or undefined when it may. */
export type AddressCheck = (address: string) => string | undefined;

/** Cloud metadata and host-agent addresses (AWS IMDS and ECS, AWS Nitro's IPv6 services, Alibaba, Azure). */
const METADATA: Cidr[] = [
  "169.254.169.254/32",
  "169.254.170.2/32",
  "fd00:ec2::/32",
  "100.100.100.200/32",
  "168.63.129.16/32",
].map((c) => ipaddr.parseCIDR(c));

/** Ranges no mode dials and `allowAddresses` cannot open. */
const NEVER = new Set(["unspecified", "linkLocal", "multicast", "broadcast"]);

/** Ranges refused in every mode unless `allowAddresses` covers the address. */
const ALWAYS_UNLESS_ALLOWED = new Set(["loopback"]);

const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR("2000::/3");
const NAT64_WELL_KNOWN = ipaddr.parseCIDR("64:ff9b::/96");

function matches(address: Address, cidr: Cidr): boolean {
  return address.kind() === cidr[0].kind() && address.match(cidr);
}

/**
 * The IPv4 address an IPv6 address carries, when connecting to it reaches that IPv4 address: IPv4-mapped
 * (::ffff:a.b.c.d, dialled by the kernel as IPv4), IPv4-translated (::ffff:0:a.b.c.d) and NAT64's well-known
 * prefix (64:ff9b::a.b.c.d, translated by the network).
 */
function embeddedIpv4(address: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  const range = address.range();
  if (range !== "ipv4Mapped" && range !== "rfc6145" && !address.match(NAT64_WELL_KNOWN)) return undefined;
  const bytes = address.toByteArray();
  return new ipaddr.IPv4(bytes.slice(12));
}

function rangeName(address: Address): string {
  const range = address.range();
  const names: Record<string, string> = {
    unspecified: "an unspecified address",
    linkLocal: "a link-local address",
    multicast: "a multicast address",
    broadcast: "the broadcast address",
    loopback: "a loopback address",
    private: "a private address",
    uniqueLocal: "a private (unique local) address",
    carrierGradeNat: "a shared address (100.64.0.0/10)",
  };
  return names[range] ?? `a special-purpose address (${range})`;
}

export function createAddressCheck(rules: AddressRules): AddressCheck {
  const deny = (rules.deny ?? []).map((c) => ipaddr.parseCIDR(c));
  const allowed = (rules.allowAddresses ?? []).map((c) => ipaddr.parseCIDR(c));
  const allowlist = Array.isArray(rules.reach);

  function denied(address: Address): string | undefined {
    const cidr = deny.find((c) => matches(address, c));
    return cidr ? `in the env's own networks (deny ${cidr[0].toString()}/${cidr[1]})` : undefined;
  }

  /** The verdict on one address (an embedded IPv4 address is judged as itself). */
  function judge(address: Address): string | undefined {
    const refusal = denied(address);
    if (refusal) return refusal;
    if (METADATA.some((cidr) => matches(address, cidr))) return "a cloud metadata address";
    const range = address.range();
    if (NEVER.has(range)) return rangeName(address);
    if (allowed.some((cidr) => matches(address, cidr))) return undefined;
    if (ALWAYS_UNLESS_ALLOWED.has(range)) return rangeName(address);
    if (!allowlist) return undefined;
    if (range !== "unicast") return `${rangeName(address)}, which an allowlist never reaches`;
    if (address.kind() === "ipv6" && !address.match(GLOBAL_UNICAST_V6))
      return "an IPv6 address outside global unicast (2000::/3), which an allowlist never reaches";
    return undefined;
  }

  return (text) => {
    if (text.includes("%")) return "an IPv6 address with a zone id (an interface of the proxy's own machine)";
    if (!ipaddr.IPv4.isValidFourPartDecimal(text) && !ipaddr.IPv6.isValid(text)) return "not an IP address";
    const address = ipaddr.parse(text);
    const v4 = address.kind() === "ipv6" ? embeddedIpv4(address as ipaddr.IPv6) : undefined;
    // Connecting to the IPv6 form reaches the IPv4 address inside it: that is what is judged, and a `deny` CIDR
    // written in IPv6 still holds for the IPv6 form.
    if (v4) return judge(v4) ?? denied(address);
    return judge(address);
  };
}
