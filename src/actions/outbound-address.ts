// Which addresses http.request may reach. Its result is readable through the API with a read
// token, so fetching an internal address would hand that address's answer to any reader
// (server-side request forgery). By default only public unicast addresses are reached: no
// loopback (127/8, ::1), private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local
// (169.254/16 with the cloud metadata service 169.254.169.254, fe80::/10), carrier-grade NAT
// (100.64/10), unspecified (0.0.0.0, ::), multicast, reserved, or IPv6 forms that embed an IPv4
// address (IPv4-mapped, NAT64, 6to4, Teredo). BATON_HTTP_ALLOW lists the exceptions: host names,
// addresses and CIDR ranges.
//
// A name is checked after DNS resolution, inside the `lookup` the connection itself uses, so the
// connection goes to an address that was checked: there is no second resolution for a
// rebinding DNS server to answer differently. Only allowed addresses are handed on; a name with
// none is refused. IP literals never reach `lookup`, so checkLiteral covers them (on every hop).
import dns from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { ActionError } from './action.ts';

export const ALLOW_SETTING = 'BATON_HTTP_ALLOW';

export interface AddressPolicyOptions {
  /** Host names, IP addresses and CIDR ranges to reach although they are not public (BATON_HTTP_ALLOW). */
  allow?: readonly string[];
  /** Name resolution; dns.lookup unless a test gives another. */
  resolve?: typeof dns.lookup;
}

export interface AddressPolicy {
  /** Throws the refusal when `hostname` (a URL's) is an IP address that may not be reached. */
  checkLiteral(hostname: string): void;
  /** net.connect's `lookup`: resolves, drops what may not be reached, refuses a name left with nothing. */
  readonly lookup: LookupFunction;
}

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** The address as its own family: an IPv4-mapped IPv6 address (::ffff:127.0.0.1) is IPv4. */
const parse = (address: string): Address => ipaddr.process(address.replace(/^\[|\]$/g, ''));

/** Why `address` is not public (the ipaddr.js range name), or undefined for a public unicast one. */
export function nonPublicRange(address: Address): string | undefined {
  const range = address.range();
  if (range !== 'unicast') return range;
  // ::a.b.c.d (IPv4-compatible, deprecated) embeds an IPv4 address too.
  if (address.kind() === 'ipv6' && (address as ipaddr.IPv6).parts.slice(0, 6).every((p) => p === 0)) return 'ipv4Compatible';
  return undefined;
}

const RANGE_WORDS: Record<string, string> = {
  loopback: 'a loopback',
  private: 'a private',
  uniqueLocal: 'a private (unique local)',
  linkLocal: 'a link-local',
  carrierGradeNat: 'a carrier-grade NAT',
  unspecified: 'an unspecified',
  multicast: 'a multicast',
  broadcast: 'a broadcast',
};

/** The non-retryable refusal: names the address, why, and the setting that would allow it. */
export function addressRefused(host: string, address: string, range: string): ActionError {
  const kind = RANGE_WORDS[range] ?? `a non-public (${range})`;
  const shown = host === address ? address : `${host} (${address})`;
  return new ActionError(
    `http.request refuses ${shown}: it is ${kind} address, which http.request reaches only when ${ALLOW_SETTING} lists it ` +
      '(its host name, its address or a CIDR range around it)',
    { type: 'HttpAddressRefused', retryable: false },
  );
}

export function createAddressPolicy(o: AddressPolicyOptions = {}): AddressPolicy {
  const hosts = new Set<string>();
  const ranges: [Address, number][] = [];
  for (const entry of o.allow ?? []) {
    if (entry.includes('/')) ranges.push(ipaddr.parseCIDR(entry));
    else if (isIP(entry)) {
      const address = parse(entry);
      ranges.push([address, address.kind() === 'ipv4' ? 32 : 128]);
    } else hosts.add(normalHost(entry));
  }
  const resolve = o.resolve ?? dns.lookup;

  /** Undefined when `address` may be reached, else why not. */
  function refusedRange(address: Address): string | undefined {
    const range = nonPublicRange(address);
    if (range === undefined) return undefined;
    return ranges.some(([net, bits]) => net.kind() === address.kind() && address.match(net, bits)) ? undefined : range;
  }

  return {
    checkLiteral(hostname) {
      const bare = hostname.replace(/^\[|\]$/g, '');
      if (!isIP(bare) || hosts.has(normalHost(bare))) return;
      const range = refusedRange(parse(bare));
      if (range !== undefined) throw addressRefused(bare, bare, range);
    },
    lookup: ((hostname: string, options: dns.LookupOptions, callback: (...args: unknown[]) => void) => {
      resolve(hostname, { ...options, all: true }, (err, found: dns.LookupAddress[]) => {
        if (err) return callback(err);
        const trusted = hosts.has(normalHost(hostname));
        let refusal: ActionError | undefined;
        const allowed = found.filter(({ address }) => {
          const range = trusted ? undefined : refusedRange(parse(address));
          if (range !== undefined) refusal ??= addressRefused(hostname, address, range);
          return range === undefined;
        });
        if (allowed.length === 0) return callback(refusal ?? Object.assign(new Error(`${hostname}: no address`), { code: 'ENOTFOUND' }));
        if (options.all) return callback(null, allowed);
        return callback(null, allowed[0]!.address, allowed[0]!.family);
      });
    }) as LookupFunction,
  };
}

const normalHost = (host: string) => host.toLowerCase().replace(/\.$/, '');
