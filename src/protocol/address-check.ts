// Which addresses a computer's site proxy may dial: the check it makes on every address a host stands for, after
// resolution, before a connection is attempted; the plan asks it of a start tab at an address. The ranges are the one
// list of what is not the public web (src/protocol/address-ranges.ts, from IANA's special-purpose registries), which
// the kubernetes policies use too; what is written here is only which of them each reach mode refuses.
//
// - Every mode: the env's own networks (`deny`), loopback, link-local, cloud metadata addresses, unspecified,
//   multicast and broadcast addresses, every special-purpose range (documentation, benchmarking, reserved, NAT64
//   local-use, 6to4, Teredo, IPv6 outside 2000::/3, ...), an IPv6 address judged by the IPv4 address it carries,
//   and any address with an IPv6 zone id (which names an interface of the proxy's own machine).
// - An allowlist also: private and shared (100.64/10) addresses, which an allow-all computer dials (the env's own
//   networks are in its `deny`).
// - `allowAddresses` lets an operator dial loopback, private, shared or special-purpose ranges all the same (a
//   test's origin on loopback, a stand-in for the web on a private network); `deny`, link-local, metadata,
//   unspecified, multicast and broadcast addresses stay refused whatever it says.
import ipaddr from "ipaddr.js";
import { embeddedIpv4, isMetadataAddress, nonPublicRange, type Address } from "./address-ranges";

type Cidr = [Address, number];

export interface AddressRules {
  reach: "allow-all" | "none" | string[];
  /** CIDRs of the env's own networks. */
  deny?: string[];
  /** CIDRs that may be dialled although they are loopback, private, shared or special-purpose. */
  allowAddresses?: string[];
}

/** Why the address may not be dialled, or undefined when it may. */
export type AddressCheck = (address: string) => string | undefined;

function matches(address: Address, cidr: Cidr): boolean {
  return address.kind() === cidr[0].kind() && address.match(cidr);
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
    if (isMetadataAddress(address)) return "a cloud metadata address";
    const range = nonPublicRange(address);
    if (range === undefined) return undefined;
    if (range.kind === "never") return range.name;
    if (allowed.some((cidr) => matches(address, cidr))) return undefined;
    if (range.kind === "private" && !allowlist) return undefined;
    if (range.kind === "loopback") return range.name;
    return allowlist ? `${range.name}, which an allowlist never reaches` : `${range.name}, not the public web`;
  }

  return (text) => {
    if (text.includes("%")) return "an IPv6 address with a zone id (an interface of the proxy's own machine)";
    if (!ipaddr.IPv4.isValidFourPartDecimal(text) && !ipaddr.IPv6.isValid(text)) return "not an IP address";
    const address = ipaddr.parse(text);
    const inside = address.kind() === "ipv6" ? embeddedIpv4(address as ipaddr.IPv6) : undefined;
    if (inside === undefined) return judge(address);
    // Connecting to the IPv6 form reaches the IPv4 address inside it: that is what is judged, and a `deny` CIDR
    // written in IPv6 still holds for the IPv6 form; a deprecated form (6to4, IPv4-compatible) is refused as itself.
    const verdict = judge(inside.ipv4) ?? denied(address);
    return verdict ?? (inside.translated ? undefined : judge(address));
  };
}
