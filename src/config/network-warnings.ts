// Where a rule's `networks` would judge another address than the client's: the gateway behind a
// proxy it does not trust (every client is the proxy's address), a network that shares addresses
// with server.trustProxy (a host there is taken for a proxy and names any address it likes; the
// proxy's own requests without X-Forwarded-For are judged as it), and forward-auth without a trusted
// proxy (it learns the client's address only from one).
import { BlockList } from 'node:net'
import { parseNetwork } from './networks.js'
import type { GatewayConfig, Network, Rule, RuleLists } from './types.js'

/** proxy-addr's group names as the ranges they stand for. */
const GROUPS: Record<string, string[]> = {
  loopback: ['127.0.0.0/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
}

interface Site { readonly at: string, readonly rule: Rule }

function sites (at: string, lists: RuleLists): Site[] {
  const named = (rule: Rule): Site => ({ at: `${at}.${rule.name}.networks`, rule })
  return [...(lists.allow ?? []), ...lists.deny].map(named).filter((site) => site.rule.networks.length > 0)
}

/**
 * The trusted proxies' networks (trustProxy's addresses, ranges and group names). `true` trusts
 * every peer, and is allowed only on a loopback server.host, whose peers are all loopback addresses
 * (an outside tester's finding: it had no overlap warning at all).
 */
function trustedNetworks (trustProxy: boolean | string[]): Network[] {
  if (trustProxy === false) return []
  return (trustProxy === true ? GROUPS.loopback! : trustProxy.flatMap((entry) => GROUPS[entry] ?? [entry])).map(parseNetwork).filter((network): network is Network => typeof network !== 'string')
}

/** Whether two networks share an address: CIDR ranges either nest or are apart, so one holds the other's first address. */
function overlap (a: Network, b: Network): boolean {
  if (a.family !== b.family) return false
  const contains = (outer: Network, inner: Network): boolean => {
    const list = new BlockList()
    list.addSubnet(outer.address, outer.bits, outer.family)
    return list.check(inner.address, inner.family)
  }
  return contains(a, b) || contains(b, a)
}

/** `network` as written: the address, and the prefix unless it is a single address. */
function written (network: Network): string {
  return network.bits === (network.family === 'ipv4' ? 32 : 128) ? network.address : `${network.address}/${network.bits}`
}

export function networkWarnings (config: GatewayConfig): string[] {
  const all = [
    ...config.routes.flatMap((route, i) => sites(`routes[${i}]`, route.rules)),
    ...[...config.forwardAuth.hosts.values()].flatMap((lists) => sites('forwardAuth', lists)),
  ]
  if (all.length === 0) return []
  const { trustProxy, baseUrl } = config.server
  const trusted = trustedNetworks(trustProxy)
  // forwardAuth.hosts needs server.trustProxy (a config error without it), so its rules are judged on a proxy's word.
  return all.flatMap(({ at, rule }): string[] => {
    if (trustProxy === false && baseUrl.startsWith('https:')) {
      return [`${at}: server.baseUrl is https, which this gateway does not serve itself, and server.trustProxy is off: ` +
        'behind the proxy that ends TLS every client has the proxy\'s address; set server.trustProxy to that proxy\'s address so that X-Forwarded-For counts']
    }
    // A client inside a trusted range is taken for a proxy: its X-Forwarded-For names any address it likes.
    const shared = trusted.find((proxy) => rule.networks.some((network) => overlap(proxy, network)))
    return shared === undefined
      ? []
      : [`${at}: names addresses that server.trustProxy trusts (${written(shared)}): a host there is taken for a proxy and can name any address in X-Forwarded-For, ` +
        'inside these networks or not (and a request the proxy sends without X-Forwarded-For is judged as its own address); list only your proxies in server.trustProxy']
  })
}
