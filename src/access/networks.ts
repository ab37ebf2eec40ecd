// The `networks` condition at request time: whether the client address, as the gateway resolved
// it (server.trustProxy decides whether X-Forwarded-For counts), lies in one of a rule's networks
// (any, when it lists only `!` ones) and in none of its `!` networks.
// Each family has its own list, so that `::/0` never holds for an IPv4 client; an IPv4 client that
// reached an IPv6 socket (`::ffff:10.0.0.1`) is judged as the IPv4 address it is.
import { BlockList, isIPv4, isIPv6, SocketAddress } from 'node:net'
import { withoutPort } from '../config/networks.js'
import type { Network, RuleLists } from '../config/types.js'

const MAPPED_PREFIX = '::ffff:'

/** Whether an address is in the networks; undefined when the address cannot be told (none, or not an IP address). */
export type NetworkTest = (address: string | undefined) => boolean | undefined

/** Whether an address (known to be IP) is in a list of networks, each family in a list of its own. */
function membership (networks: readonly Network[]): (address: string, family: 'ipv4' | 'ipv6') => boolean {
  const lists = { ipv4: new BlockList(), ipv6: new BlockList() }
  for (const { address, bits, family } of networks) lists[family].addSubnet(address, bits, family)
  return (address, family) => lists[family].check(address, family)
}

export function networkTest (networks: readonly Network[]): NetworkTest {
  const inside = networks.some((network) => !network.outside) ? membership(networks.filter((network) => !network.outside)) : () => true
  const excluded = membership(networks.filter((network) => network.outside))
  return (given) => {
    const client = given === undefined ? undefined : judged(withoutPort(given))
    if (client === undefined) return undefined
    return inside(client.address, client.family) && !excluded(client.address, client.family)
  }
}

/**
 * The address as rules judge it: IPv4, or IPv6 in Node's one spelling, an IPv4 address in IPv6 form
 * read as IPv4 in any spelling (`::ffff:10.0.0.1`, `::ffff:a00:1`, `0:0:0:0:0:ffff:10.0.0.1`), as
 * proxy-addr, the rate limits and the sessions page read it; undefined for what is no IP address.
 */
function judged (address: string): { address: string, family: 'ipv4' | 'ipv6' } | undefined {
  if (isIPv4(address)) return { address, family: 'ipv4' }
  // A zone (`fe80::1%eth0`) is not in any network written in gateway.yaml, which takes none.
  if (!isIPv6(address) || address.includes('%')) return undefined
  const canonical = new SocketAddress({ address, family: 'ipv6' }).address
  const tail = canonical.slice(MAPPED_PREFIX.length)
  return canonical.startsWith(MAPPED_PREFIX) && isIPv4(tail) ? { address: tail, family: 'ipv4' } : { address: canonical, family: 'ipv6' }
}

/** Whether any `allow` or `deny` rule of `lists` names networks: only such routes resolve the client address. */
export function namesNetworks (lists: RuleLists): boolean {
  return [...(lists.allow ?? []), ...lists.deny].some((rule) => rule.networks.length > 0)
}
