// The client addresses a rule's `networks` take, as sets one can add and take away, for the one
// question a refusal asks of them (rules.ts): is there an address from which an allow rule takes
// this request and no deny rule on the request alone (no condition on the person) refuses it? Only
// then can "connect from a network its rules take" help. "Allow the VPN, deny the guest Wi-Fi" is
// such a route for a person at home; "allow the VPN, deny 10.0.0.0/8" (the VPN inside it) is not.
// Each family is its own set (a rule's networks never take an IPv4 client by an IPv6 range:
// networks.ts), kept as sorted, disjoint, closed ranges of the address read as a number.
import { ipv6Bytes } from '../config/networks.js'
import type { Network } from '../config/types.js'
import { NO_READINGS, otherReadings } from './path-readings.js'

type Family = Network['family']
type Ranges = ReadonlyArray<readonly [bigint, bigint]>
export type AddressSet = Readonly<Record<Family, Ranges>>

const BITS: Readonly<Record<Family, number>> = { ipv4: 32, ipv6: 128 }
const FAMILIES = ['ipv4', 'ipv6'] as const

/** What {@link fromElsewhere} reads of a compiled rule (rules.ts CompiledRule). */
export interface RuleReach {
  /** Whether someone at the address could meet it with this request; undefined: the request is not one it takes. */
  readonly takesFrom: (method: string | undefined, path: string | undefined, address: string | undefined, readings?: readonly string[]) => boolean | undefined
  /** It names no condition on the person. */
  readonly personless: boolean
  /** The addresses its `networks` take. */
  readonly region: AddressSet
}

/**
 * Whether no allow rule takes this request from `address` but one takes it from another address,
 * where no deny rule on the request alone refuses it (an outside tester's finding: such a deny rule
 * may cover the allow rule's network; a re-reading's: or lie beside it, the guest Wi-Fi beside the
 * VPN), each deny rule reading the path as the gate does (folded, as routers dispatch it). The sets
 * are compared once per choice of the rules that take the request, at most {@link CHOICES} kept.
 */
export function fromElsewhere (allow: readonly RuleReach[], deny: readonly RuleReach[], folds: boolean): (method: string | undefined, path: string | undefined, address: string | undefined) => boolean {
  const compared = new Map<string, boolean>()
  return (method, path, address) => {
    const reach = allow.map((rule) => rule.takesFrom(method, path, address))
    if (!reach.includes(false) || reach.includes(true)) return false
    const readings = folds ? otherReadings(path) : NO_READINGS
    const shutting = deny.map((rule) => rule.personless && rule.takesFrom(method, path, address, readings) !== undefined)
    const choice = `${reach.map((taken) => taken === undefined ? 0 : 1).join('')}:${shutting.map(Number).join('')}`
    let left = compared.get(choice)
    if (left === undefined) {
      const open = union(allow.filter((_rule, i) => reach[i] !== undefined).map((rule) => rule.region))
      left = someLeft(open, union(deny.filter((_rule, i) => shutting[i]).map((rule) => rule.region)))
      if (compared.size < CHOICES) compared.set(choice, left)
    }
    return left
  }
}

/** How many choices of rules a route's refusals remember the comparison of. */
const CHOICES = 64

/** IPv4-mapped IPv6 addresses (`::ffff:0:0/96`): no client comes from there, it is judged as the IPv4 address it is. */
const MAPPED: AddressSet = Object.freeze({ ipv4: [], ipv6: [[0xffffn << 32n, (0xffffn << 32n) + 0xffffffffn]] })

/** Every address a client can come from, of both families: what a rule without `networks` takes. */
export const EVERY_ADDRESS: AddressSet = minus({ ipv4: [[0n, (1n << 32n) - 1n]], ipv6: [[0n, (1n << 128n) - 1n]] }, MAPPED)

/** The addresses `networks` take: inside one of the plain ones (any, when there are none) and outside every `!` one. */
export function addressSet (networks: readonly Network[]): AddressSet {
  const inside = networks.filter((network) => !network.outside)
  const taken = inside.length === 0 ? EVERY_ADDRESS : minus(union(inside.map(single)), MAPPED)
  return minus(taken, union(networks.filter((network) => network.outside).map(single)))
}

/** The addresses in any of `sets`. */
export function union (sets: readonly AddressSet[]): AddressSet {
  return perFamily((family) => merged(sets.flatMap((set) => set[family])))
}

/** The addresses of `from` that are not in `away`: one pass over both (each sorted and disjoint). */
export function minus (from: AddressSet, away: AddressSet): AddressSet {
  return perFamily((family) => rangesMinus(from[family], away[family]))
}

/** Whether some address of `from` is not in `away`, without making the set. */
export function someLeft (from: AddressSet, away: AddressSet): boolean {
  return FAMILIES.some((family) => rangesMinus(from[family], away[family], true).length > 0)
}

export function isEmpty (set: AddressSet): boolean {
  return FAMILIES.every((family) => set[family].length === 0)
}

/**
 * `from` without `away`, both sorted and disjoint, walked together once (an attacker's finding: a
 * walk of `from` for each range of `away` cost a second per refusal with 5,000 networks a side).
 * `first`: stop at the first range left.
 */
function rangesMinus (from: Ranges, away: Ranges, first = false): Ranges {
  const out: Array<readonly [bigint, bigint]> = []
  let j = 0
  for (const [start, end] of from) {
    let at = start
    while (j < away.length && away[j]![1] < at) j++
    for (let k = j; k < away.length && away[k]![0] <= end && at <= end; k++) {
      const [cutStart, cutEnd] = away[k]!
      if (cutStart > at) out.push([at, cutStart - 1n])
      if (cutEnd >= at) at = cutEnd + 1n
    }
    if (at <= end) out.push([at, end])
    if (first && out.length > 0) return out
  }
  return out
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
