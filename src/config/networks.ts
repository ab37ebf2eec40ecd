// `networks` in a rule: IPv4 and IPv6 CIDR ranges and single addresses, each maybe after `!` (the
// address must be outside it), read once into the form the gate's matcher takes (src/access/networks.ts). What could be read two ways is refused with the
// spelling to write: host bits set under the prefix (`10.1.2.3/8`: the network 10.0.0.0/8, or the
// address?), an IPv4 address in IPv6 form (`::ffff:10.0.0.1`: clients reach the gateway as IPv4).
import { BlockList, isIP, isIPv4, SocketAddress } from 'node:net'
import { describe } from './problems.js'
import type { Network } from './types.js'

const MAPPED = new BlockList()
MAPPED.addSubnet('::ffff:0:0', 96, 'ipv6')

/** The network written as `entry`, or why it is not one (phrased to follow "must be ..., got"). */
export function parseNetwork (entry: string): Network | string {
  const trimmed = entry.trim()
  const outside = trimmed.startsWith('!')
  const text = outside ? trimmed.slice(1).trimStart() : trimmed
  const slash = text.indexOf('/')
  const address = slash === -1 ? text : text.slice(0, slash)
  const version = isIP(address)
  if (version === 0 || address.includes('%')) return `an IP address or CIDR range such as 10.0.0.0/8 or 2001:db8::/32 (or one after !, for outside it), got ${describe(entry)}`
  const family = version === 4 ? 'ipv4' : 'ipv6'
  const most = version === 4 ? 32 : 128
  const bitsText = slash === -1 ? String(most) : text.slice(slash + 1)
  if (!/^\d{1,3}$/.test(bitsText) || Number(bitsText) > most) return `a prefix length from 0 to ${most} after the /, got ${describe(entry)}`
  const bits = Number(bitsText)
  if (family === 'ipv6' && MAPPED.check(address, 'ipv6')) return `written as IPv4 (clients reach the gateway as IPv4 addresses), such as 10.0.0.0/8, got ${describe(entry)}`
  const network = networkAddress(address, family, bits)
  if (network !== canonicalAddress(address, family)) return `the network's own address (${network}/${bits}), got ${describe(entry)}: the bits after the prefix must be zero`
  return { address: network, bits, family, outside }
}

/** The address spelled as Node spells it (`2001:db8::` for `2001:0db8:0:0::`). */
function canonicalAddress (address: string, family: 'ipv4' | 'ipv6'): string {
  return new SocketAddress({ address, family }).address
}

/** `address` with every bit after the first `bits` cleared. */
function networkAddress (address: string, family: 'ipv4' | 'ipv6', bits: number): string {
  const bytes = family === 'ipv4' ? address.split('.').map(Number) : ipv6Bytes(canonicalAddress(address, family))
  const cleared = bytes.map((byte, i) => {
    const kept = Math.max(0, Math.min(8, bits - i * 8))
    return byte & (0xff << (8 - kept)) & 0xff
  })
  if (family === 'ipv4') return cleared.join('.')
  const groups = Array.from({ length: 8 }, (_, i) => ((cleared[2 * i]! << 8) | cleared[2 * i + 1]!).toString(16))
  return canonicalAddress(groups.join(':'), family)
}

/** The 16 bytes of an IPv6 address as Node spells it (`::` expanded; an embedded IPv4 tail read as its 4 bytes). */
export function ipv6Bytes (address: string): number[] {
  const [head = '', tail] = address.split('::')
  const groups = (part: string | undefined): number[] => part === undefined || part === ''
    ? []
    : part.split(':').flatMap((group) => group.includes('.') ? ipv4Groups(group) : [parseInt(group, 16)])
  const left = groups(head)
  const right = groups(tail)
  const all = [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right]
  return all.flatMap((group) => [group >> 8, group & 0xff])
}

function ipv4Groups (dotted: string): number[] {
  const [a = 0, b = 0, c = 0, d = 0] = dotted.split('.').map(Number)
  return [(a << 8) | b, (c << 8) | d]
}

/**
 * A client's address (the socket's, or the entry of X-Forwarded-For a trusted proxy wrote) without
 * the port some proxies write after it (`203.0.113.9:51234`, `[2001:db8::1]:51234`: Azure
 * Application Gateway's X-Forwarded-For does): one client, whichever connection it came on. What
 * is judged on the address (`networks` rules) and counted by it (the rate limits) reads this.
 * Anything else is returned as it is.
 */
export function withoutPort (address: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(address)
  if (bracketed !== null) return bracketed[1]!
  const colon = address.lastIndexOf(':')
  return colon !== -1 && address.indexOf(':') === colon && /^\d{1,5}$/.test(address.slice(colon + 1)) && isIPv4(address.slice(0, colon)) ? address.slice(0, colon) : address
}
