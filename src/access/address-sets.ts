// The client addresses a rule's `networks` take, as sets one can add and take away, for the one
// question a refusal asks of them (rules.ts): is there an address from which an allow rule takes
// this request and no deny rule on the request alone (no condition on the person) refuses it? Only
// then can "connect from a network its rules take" help. "Allow the VPN, deny the guest Wi-Fi" is
// such a route for a person at home; "allow the VPN, deny 10.0.0.0/8" (the VPN inside it) is not.
// Each family is its own set (a rule's networks never take an IPv4 client by an IPv6 range:
// networks.ts), kept as sorted, disjoint, closed ranges of the address read as a number.
import { ipv6Bytes } from '../config/networks.js'
import type { Network } from '../config/types.js'

type Family = Network['family']
type Ranges = ReadonlyArray<readonly [bigint, bigint]>
export type AddressSet = Readonly<Record<Family, Ranges>>

const BITS: Readonly<Record<Family, number>> = { ipv4: 32, ipv6: 128 }
const FAMILIES = ['ipv4', 'ipv6'] as const

/** Every address of both families: what a rule without `networks` takes. */
export const EVERY_ADDRESS: AddressSet = Object.freeze({ ipv4: [[0n, (1n << 32n) - 1n]], ipv6: [[0n, (1n << 128n) - 1n]] })

/** The addresses `networks` take: inside one of the plain ones (any, when there are none) and outside every `!` one. */
export function addressSet (networks: readonly Network[]): AddressSet {
  const inside = networks.filter((network) => !network.outside)
  const taken = inside.length === 0 ? EVERY_ADDRESS : union(inside.map(single))
  return minus(taken, union(networks.filter((network) => network.outside).map(single)))
}

/** The addresses in any of `sets`. */
export function union (sets: readonly AddressSet[]): AddressSet {
  return perFamily((family) => merged(sets.flatMap((set) => set[family])))
}

/** The addresses of `from` that are not in `away`. */
export function minus (from: AddressSet, away: AddressSet): AddressSet {
  return perFamily((family) => away[family].reduce<Ranges>((left, range) => left.flatMap((kept) => without(kept, range)), from[family]))
}

export function isEmpty (set: AddressSet): boolean {
  return FAMILIES.every((family) => set[family].length === 0)
}

function perFamily (each: (family: Family) => Ranges): AddressSet {
  return { ipv4: each('ipv4'), ipv6: each('ipv6') }
}

/** The range of one network (its address is its own: config/networks.ts refuses host bits). */
function single ({ address, bits, family }: Network): AddressSet {
  const bytes = family === 'ipv4' ? address.split('.').map(Number) : ipv6Bytes(address)
  const first = bytes.reduce((value, byte) => (value << 8n) | BigInt(byte), 0n)
  const last = first + (1n << BigInt(BITS[family] - bits)) - 1n
  return { ipv4: [], ipv6: [], [family]: [[first, last]] }
}

/** Ranges sorted and joined where they overlap or touch. */
function merged (ranges: Ranges): Ranges {
  const sorted = [...ranges].sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)
  const out: Array<[bigint, bigint]> = []
  for (const [first, last] of sorted) {
    const previous = out.at(-1)
    if (previous !== undefined && first <= previous[1] + 1n) previous[1] = last > previous[1] ? last : previous[1]
    else out.push([first, last])
  }
  return out
}

/** `kept` with `range` taken out: none, one or two ranges. */
function without ([first, last]: readonly [bigint, bigint], [start, end]: readonly [bigint, bigint]): Ranges {
  if (end < first || start > last) return [[first, last]]
  return [...(start > first ? [[first, start - 1n] as const] : []), ...(end < last ? [[end + 1n, last] as const] : [])]
}
