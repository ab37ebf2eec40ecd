// Whose plain names an upstream gets. A route names its own provider's people plainly (`alice`) in
// the identity headers, the assertion's `sub` and its `users` rules, and any other issuer's people
// qualified (`partner:alice`, src/access/name-spaces.ts). Two routes of different providers in front of
// one upstream (`/a/` signs in at corp, `/b/` at partner, both at http://app:3000) then send it
// `alice` for two people: the upstream cannot tell them apart, unless it keeps the two paths'
// users apart itself. `--check` says so, once per upstream.
import type { GatewayConfig } from './types.js'

/** The upstream's origin, as the proxy reaches it (the host in lower case, without a default port). */
function origin (upstream: string): string {
  try {
    return new URL(upstream).origin
  } catch {
    return upstream
  }
}

export function upstreamNameWarnings (config: Pick<GatewayConfig, 'routes'>): string[] {
  // A route that needs a sign-in always has a provider (validate/routes.ts); a public one names nobody.
  const byUpstream = new Map<string, Array<{ at: string, provider: string }>>()
  config.routes.forEach(({ auth, provider, upstream }, i) => {
    if (auth === 'none' || provider === undefined) return
    const key = origin(upstream)
    byUpstream.set(key, [...byUpstream.get(key) ?? [], { at: `routes[${i}]`, provider }])
  })
  return [...byUpstream].flatMap(([upstream, routes]) => {
    const issuers = [...new Set(routes.map((route) => route.provider))]
    if (issuers.length < 2) return []
    const [first, second] = issuers
    const which = routes.map((route) => `${route.at} (${route.provider})`).join(', ')
    return [`${which}: ${upstream} gets the people of ${issuers.join(' and ')} by their plain names, in the identity headers and the assertion's sub: ` +
      `alice of ${first} and alice of ${second} look the same to it. Put one route in front of it with providers: [${first}, ${second}] (the people of ${second} are then named ${second}:alice), ` +
      'or a route of its own for each provider in front of upstreams that share no users; ignore this if the upstream keeps the paths\' users apart itself']
  })
}
