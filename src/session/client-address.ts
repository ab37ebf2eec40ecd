// The client address a session signed in from, as its person-index entry (./person-entry.ts) keeps
// it: an IPv4 address whole (4 bytes; an IPv4-mapped IPv6 address is the IPv4 one), an IPv6 address
// as its /64 network (8 bytes), anything else as nothing. The entry must stay within the 64 bytes
// of a compact ranked-set member, where a whole IPv6 address does not fit; its network is what
// tells one place from another (the other half is the interface's, often a temporary address that
// changes by the day, RFC 8981). The address is the one Fastify resolved (server.trustProxy): it
// labels a session for its owner, and decides nothing.
// @see https://www.rfc-editor.org/rfc/rfc4291#section-2.5.4
import { isIP, SocketAddress } from 'node:net'
import { ipv6Bytes } from '../config/networks.js'

/** How much of an IPv6 address is kept: its /64 network. */
const IPV6_KEPT = 8

/** The bytes an entry keeps of `address` (none for what is not an IP address). */
export function addressBytes (address: string | undefined): Buffer {
  if (typeof address !== 'string') return Buffer.alloc(0)
  // A link-local address's zone (`fe80::1%eth0`) names this host's interface, not the client.
  const bare = address.split('%', 1)[0]!
  const version = isIP(bare)
  if (version === 4) return Buffer.from(bare.split('.').map(Number))
  if (version !== 6) return Buffer.alloc(0)
  const bytes = Buffer.from(ipv6Bytes(new SocketAddress({ address: bare, family: 'ipv6' }).address))
  const mapped = bytes.subarray(0, 10).every((byte) => byte === 0) && bytes[10] === 0xff && bytes[11] === 0xff
  return mapped ? bytes.subarray(12) : bytes.subarray(0, IPV6_KEPT)
}

/** What the list shows of the bytes {@link addressBytes} kept: `203.0.113.7`, `2001:db8:1:2::/64`; undefined for none. */
export function addressText (bytes: Uint8Array): string | undefined {
  if (bytes.length === 4) return [...bytes].join('.')
  if (bytes.length !== IPV6_KEPT) return undefined
  const groups = Array.from({ length: 8 }, (_, i) => i < IPV6_KEPT / 2 ? ((bytes[2 * i]! << 8) | bytes[2 * i + 1]!).toString(16) : '0')
  return `${new SocketAddress({ address: groups.join(':'), family: 'ipv6' }).address}/${IPV6_KEPT * 8}`
}
