// After the schema pass (schema-check.ts): presets, defaults, and the rules JSON Schema cannot say
// (a URL's scheme, a route's provider must exist, one store form, ranges of durations, cookie rules,
// plain http to a remote provider). Each rule is skipped when a key it depends on already has a
// problem, so one mistake gives one message. `validate` returns the resolved GatewayConfig. Each
// section's rules are in its own file under validate/; what spans sections (placeholders, the claims
// each provider keeps, a route's bearer issuers and step-up provider) is here.
import type { ForwardAuthConfig, GatewayConfig, ProviderConfig, RouteConfig } from './types.js'
import { applyPreset } from './presets.js'
import { Issues, describe, isObject, type Path } from './problems.js'
import { checkBearerIssuers } from './bearer-section.js'
import { checkRuleProviders, claimPaths } from './rule-lists.js'
import type { ProviderYaml } from './schema.js'
import { checkSchema, withDefaults } from './schema-check.js'
import { isLoopbackHost } from './loopback.js'
import { duration } from './validate/values.js'
import { validateServer, validateRateLimit } from './validate/server.js'
import { validateSession } from './validate/session.js'
import { storePasswords, validateStore } from './validate/store.js'
import { validateProvider } from './validate/providers.js'
import { validateRoute, checkReauthProvider, checkSignInProvider, reportReachingRoutes } from './validate/routes.js'
import { tokenOnlyIssuers } from './route-reach.js'
import { validateAssertion, reportHeaderClashes } from './validate/headers.js'
import { checkForwardAuthAgainst, validateForwardAuth } from './validate/forward-auth.js'
import { validateMetrics, validateTracing } from './validate/observability.js'
import { validateAgents } from './validate/agents.js'

/** The placeholder deploy/kubernetes/base/secrets.env ships for every value an operator must set. */
export const PLACEHOLDER = 'REPLACE-ME'

/**
 * Reports each value that still holds the placeholder, and removes it, so that nothing is reported
 * a second time about the same value (its length, its form).
 */
function reportPlaceholders (issues: Issues, node: Record<string, unknown> | unknown[], path: Path): void {
  for (const [key, value] of Object.entries(node)) {
    const at: Path = [...path, Array.isArray(node) ? Number(key) : key]
    if (typeof value === 'string' && value.includes(PLACEHOLDER)) {
      issues.add(at, `still holds the placeholder ${PLACEHOLDER}: set the real value (see docs/deployment.md, "Secrets")`)
      if (!Array.isArray(node)) delete node[key]
    } else if (isObject(value) || Array.isArray(value)) {
      reportPlaceholders(issues, value, at)
    }
  }
}

/**
 * Each provider keeps, in its sessions, the claims that some rule or header mapping may read: the
 * rules and headers of its routes, and the rules of every forward-auth host (any provider's session
 * may be judged there).
 */
function keepNamedClaims (providers: Record<string, ProviderConfig>, routes: readonly RouteConfig[], forwardAuth: ForwardAuthConfig): void {
  const hosts = [...forwardAuth.hosts.values()].flatMap(claimPaths)
  for (const provider of Object.values(providers)) {
    const named = routes.filter((route) => route.providers.includes(provider.name))
      .flatMap((route) => [...claimPaths(route.rules), ...route.headers.map((header) => header.claim)])
    provider.keptClaims = [...new Set([...named, ...hosts])].sort()
  }
}

/**
 * Validates a parsed (and substituted) config: the schema pass, presets, defaults, then the rules
 * above. Returns the resolved config; the problems are in `issues`.
 */
export function validate (issues: Issues, plain: unknown): GatewayConfig {
  const checked = checkSchema(issues, plain)
  reportPlaceholders(issues, checked, [])
  // Presets fill what a provider entry leaves out, before the schema's defaults do.
  if (isObject(checked.providers)) {
    for (const [name, entry] of Object.entries(checked.providers)) {
      if (!isObject(entry)) continue
      const { provider, problems } = applyPreset(entry as ProviderYaml)
      for (const [key, message] of problems) issues.add(['providers', name, key], message)
      checked.providers[name] = provider
    }
  }
  // Written by the operator, not filled in by the schema's defaults: it turns the assertions on.
  const assertionWritten = checked.assertion !== undefined
  const raw = withDefaults(checked)
  const server = validateServer(issues, raw.server)

  const providers: Record<string, ProviderConfig> = {}
  for (const [name, entry] of Object.entries(raw.providers ?? {})) providers[name] = validateProvider(issues, name, entry, isLoopbackHost(new URL(server.baseUrl).hostname))

  const routes: RouteConfig[] = []
  const names = Object.keys(raw.providers ?? {})
  ;(raw.routes ?? []).forEach((entry, i) => {
    if (!isObject(entry)) return
    const route = validateRoute(issues, i, entry, names)
    if (routes.some((other) => other.path === route.path) && entry.path !== undefined) {
      issues.add(['routes', i, 'path'], `duplicates another route's path ${describe(route.path)}`)
    }
    routes.push(route)
  })
  reportReachingRoutes(issues, routes, tokenOnlyIssuers(providers))

  const store = validateStore(issues, raw.store)
  if (store.type === 'memory' && server.workers > 1 && !issues.touched(['store', 'type'])) {
    issues.add(['server', 'workers'], 'several workers need a shared store: set store.type to redis (the memory store lives in one process)')
  }
  const forwardAuth = validateForwardAuth(issues, raw.forwardAuth, isLoopbackHost(new URL(server.baseUrl).hostname))
  const assertion = validateAssertion(issues, raw.assertion, assertionWritten, routes)
  reportHeaderClashes(issues, routes, assertion.header)
  keepNamedClaims(providers, routes, forwardAuth)
  routes.forEach((route, i) => {
    const reported = issues.touched(['routes', i, 'provider']) || issues.touched(['routes', i, 'providers']) ? route.providers : []
    if (route.bearer !== undefined) checkBearerIssuers(issues, ['routes', i, 'bearer'], route.bearer, providers, reported)
  })
  routes.forEach((route, i) => { checkReauthProvider(issues, ['routes', i, 'reauth'], route, providers) })
  routes.forEach((route, i) => { checkSignInProvider(issues, ['routes', i, route.providers.length > 1 ? 'providers' : 'provider'], route, providers) })
  routes.forEach((route, i) => { checkRuleProviders(issues, ['routes', i], route.rules, [...new Set([...route.providers, ...(route.bearer?.issuers ?? [])])]) })
  for (const [host, lists] of forwardAuth.hosts) checkRuleProviders(issues, ['forwardAuth', 'hosts', host], lists, Object.keys(providers))
  for (const [host, bearer] of forwardAuth.bearer) checkBearerIssuers(issues, ['forwardAuth', 'hosts', host, 'bearer'], bearer, providers)
  checkForwardAuthAgainst(issues, forwardAuth, server.trustProxy, [raw.session.secret, ...raw.session.previousSecrets, ...Object.values(providers).map((provider) => provider.clientSecret), ...storePasswords(store)])
  return {
    server,
    session: validateSession(issues, raw.session, server.baseUrl, issues.touched(['server', 'baseUrl'])),
    store,
    state: { ttlMs: duration(issues, ['state', 'ttl'], raw.state.ttl, 10_000, 3_600_000) },
    providers,
    routes,
    metrics: validateMetrics(issues, raw.metrics, server),
    rateLimit: validateRateLimit(raw.rateLimit),
    assertion,
    agents: validateAgents(issues, raw.agents, routes, server),
    tracing: validateTracing(issues, raw.tracing),
    forwardAuth,
  }
}
