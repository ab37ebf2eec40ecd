// Where a rule's `networks` would judge another address than the client's: the gateway behind a
// proxy it does not trust (every client is the proxy's address), an `allow` network that holds a
// trusted proxy (a request the proxy makes without X-Forwarded-For is judged as the proxy), and
// forward-auth without a trusted proxy (it learns the client's address only from one).
import { BlockList } from 'node:net'
import { parseNetwork } from './networks.js'
import type { GatewayConfig, Network, Rule, RuleLists } from './types.js'

/** proxy-addr's group names as the ranges they stand for. */
const GROUPS: Record<string, string[]> = {
  loopback: ['127.0.0.0/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
}

interface Site { readonly at: string, readonly rule: Rule, readonly inAllow: boolean, readonly forwardAuth: boolean }

function sites (at: string, lists: RuleLists, forwardAuth: boolean): Site[] {
  const named = (rule: Rule, inAllow: boolean): Site => ({ at: `${at}.${rule.name}.networks`, rule, inAllow, forwardAuth })
  return [...(lists.allow ?? []).map((rule) => named(rule, true)), ...lists.deny.map((rule) => named(rule, false))].filter((site) => site.rule.networks.length > 0)
}

/** The trusted proxies' networks (trustProxy's addresses, ranges and group names). */
function trustedNetworks (trustProxy: boolean | string[]): Network[] {
  if (typeof trustProxy === 'boolean') return []
  return trustProxy.flatMap((entry) => GROUPS[entry] ?? [entry]).map(parseNetwork).filter((network): network is Network => typeof network !== 'string')
}

/** Whether one of `networks` holds the first address of `network` (a trusted proxy's). */
function holds (networks: readonly Network[], network: Network): boolean {
  const list = new BlockList()
  const inside = networks.filter((own) => !own.outside)
  for (const { address, bits, family } of inside) list.addSubnet(address, bits, family)
  return inside.some((own) => own.family === network.family) && list.check(network.address, network.family)
}

export function networkWarnings (config: GatewayConfig): string[] {
  const all = [
    ...config.routes.flatMap((route, i) => sites(`routes[${i}]`, route.rules, false)),
    ...[...config.forwardAuth.hosts.values()].flatMap((lists) => sites('forwardAuth', lists, true)),
  ]
  if (all.length === 0) return []
  const { trustProxy, baseUrl } = config.server
  const trusted = trustedNetworks(trustProxy)
  return all.flatMap(({ at, rule, inAllow, forwardAuth }): string[] => {
    if (forwardAuth && trustProxy === false) {
      return [`${at}: forward-auth learns the client's address only from a trusted proxy's X-Forwarded-For, and server.trustProxy is off: ` +
        `this rule ${inAllow ? 'never admits' : 'refuses every request'}; set server.trustProxy to the proxy in front`]
    }
    if (trustProxy === false && baseUrl.startsWith('https:')) {
      return [`${at}: server.baseUrl is https, which this gateway does not serve itself, and server.trustProxy is off: ` +
        'behind the proxy that ends TLS every client has the proxy\'s address; set server.trustProxy to that proxy\'s address so that X-Forwarded-For counts']
    }
    const proxy = inAllow ? trusted.find((network) => holds(rule.networks, network)) : undefined
    return proxy === undefined
      ? []
      : [`${at}: admits the trusted proxy ${proxy.address}${proxy.bits === (proxy.family === 'ipv4' ? 32 : 128) ? '' : `/${proxy.bits}`} itself: ` +
        'a request it sends without X-Forwarded-For is judged as the proxy\'s address; make the proxy always set X-Forwarded-For']
  })
}
