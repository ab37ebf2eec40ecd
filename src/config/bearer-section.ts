// `bearer:` on a route or a forward-auth host: machine clients that bring their own access token.
// Read here into the one form the token checks use (src/access/bearer.ts): issuers default to the
// route's provider (on a forward-auth host they stay empty, meaning the provider the forward-auth
// URL names, known only per request), scopes are single scope tokens. What cannot be checked is a
// problem at its key path: an issuer that is no provider, or a provider without `issuer` (no
// discovery, so no keys to verify a token with and no introspection endpoint).
import { describe, type Issues, type Path } from './problems.js'
import { closest } from './did-you-mean.js'
import type { BearerConfig, GatewayConfig, ProviderConfig, Rule } from './types.js'

/** A `bearer:` block as gateway.yaml writes it (the schema pass has checked the types and keys). */
export interface BearerYaml {
  /** Optional here: the schema pass reports a missing or empty one and leaves it out. */
  audience?: string
  issuers?: string[]
  scopes: string[]
  header: 'authorization' | 'proxy-authorization'
  introspect: boolean | string
  claimsFrom: BearerConfig['claimsFrom']
}

/**
 * The bearer block at `at`, or undefined when absent. `provider`: the route's providers, the issuers' default;
 * null on a forward-auth host, where no `issuers` is kept as an empty list: the provider the
 * forward-auth URL names (/oauth/auth/<provider>/) issues the tokens.
 */
export function bearerSection (issues: Issues, at: Path, raw: BearerYaml | undefined, provider: readonly string[] | null | undefined): BearerConfig | undefined {
  if (raw === undefined) return undefined
  // Absent, or dropped by the schema pass (an empty string, not a string): a problem, never a crash.
  const audience = typeof raw.audience === 'string' ? raw.audience.trim() : ''
  if (audience === '' && !issues.touched([...at, 'audience'])) issues.add([...at, 'audience'], 'must name the audience the tokens are issued for, such as api://orders')
  const issuers = [...new Set((raw.issuers ?? (Array.isArray(provider) ? provider : [])).map((name) => name.trim()))]
  if (issuers.length === 0 && provider !== null && !issues.touched([...at, 'issuers'])) {
    issues.add([...at, 'issuers'], 'must name the providers whose tokens are accepted (there is no route provider to default to)')
  }
  if (provider === null && raw.header === 'proxy-authorization') {
    // The proxy in front builds the application's request and copies the gateway's Authorization
    // onto it: forward-auth cannot leave the application its own.
    issues.add([...at, 'header'], 'must be authorization on a forward-auth host: the proxy in front sets the application\'s Authorization from the gateway\'s answer, so a token in Proxy-Authorization cannot leave the application its own', 'leave header out, or put the route behind the gateway\'s own proxy (routes:)')
  }
  raw.scopes.forEach((scope, i) => {
    // A scope is one token of the space-separated `scope` claim: `a b` could never be found in it.
    if (/[\s"\\]/.test(scope)) issues.add([...at, 'scopes', i], `must be one scope, without spaces or quotes, got ${describe(scope)}`)
  })
  const introspect = typeof raw.introspect === 'string' ? raw.introspect.trim() : raw.introspect
  if (typeof introspect === 'string' && !issuers.includes(introspect)) {
    issues.add([...at, 'introspect'], `names ${describe(introspect)}, which is not one of issuers (${issuers.join(', ') || 'none listed'})`, issuers.length === 0 ? 'list the provider in issuers too' : 'name one of issuers, or true for each of them')
  }
  return { audience, issuers, scopes: raw.scopes, header: raw.header, introspect, claimsFrom: raw.claimsFrom }
}

/** The issuers whose introspection endpoints `bearer` sends opaque tokens to, in order. */
export function introspectedIssuers (bearer: Pick<BearerConfig, 'issuers' | 'introspect'>): readonly string[] {
  if (bearer.introspect === true) return bearer.issuers
  return bearer.introspect === false ? [] : [bearer.introspect]
}

/**
 * Each bearer block's issuers are providers with an `issuer`: discovery gives the keys a JWT is
 * verified with and the endpoint an opaque token is introspected at. `reported`: names a problem
 * was reported for already (a route's unknown provider).
 */
export function checkBearerIssuers (issues: Issues, at: Path, bearer: BearerConfig, providers: Record<string, ProviderConfig>, reported: readonly string[] = []): void {
  const names = Object.keys(providers)
  // One issuer under two names (a sign-in provider and a token-only one): its tokens would be taken for the first.
  const seen = new Map<string, string>()
  bearer.issuers.forEach((name, i) => {
    const issuer = Object.hasOwn(providers, name) ? providers[name]!.issuer : undefined
    if (issuer === undefined) return
    const first = seen.get(sameIssuer(issuer))
    if (first === undefined) seen.set(sameIssuer(issuer), name)
    else issues.add([...at, 'issuers', i], `names ${name}, whose issuer ${describe(issuer)} is ${first}'s too: every token of it would be judged as ${first}'s`, `keep one of ${first} and ${name} here`)
  })
  bearer.issuers.forEach((name, i) => {
    const where = [...at, 'issuers', i]
    const provider = Object.hasOwn(providers, name) ? providers[name] : undefined
    if (provider === undefined) {
      // Told already: the provider's own section, or the route's provider the issuers default to (one mistake, one message).
      if (issues.touched(['providers', name]) || issues.assumed(['providers', name]) || reported.includes(name)) return
      const match = closest(name, names)
      issues.add(where, `names no configured provider: ${describe(name)}`, match !== undefined ? `did you mean \`${match}\`?` : `known: ${names.join(', ') || 'none'}`)
      return
    }
    const introspected = introspectedIssuers(bearer).includes(name)
    if (provider.tokenOnly && (introspected || bearer.claimsFrom === 'introspection')) {
      const key = introspected ? 'introspect' : 'claimsFrom'
      issues.add([...at, key], `asks ${name}'s introspection endpoint, and ${name} is a token-only issuer: introspection needs this gateway's client credentials there, and it has none`, 'accept only its JWTs (introspect: false, claimsFrom: token), or give the provider a clientId and clientSecret')
    }
    if (provider.issuer === undefined && !issues.touched(['providers', name, 'issuer'])) {
      issues.add(where, `names provider ${name}, which has no \`issuer\`: without OIDC discovery there are no keys to verify its tokens with`, 'set the provider\'s issuer (its discovery document must list jwks_uri), or name in `issuers` providers that have one (without `issuers`, the route\'s providers are used)')
    }
  })
}

/**
 * Where the callers of several issuers meet one set of rules: a route, or a forward-auth host (whose
 * own provider is the one its URL names, /oauth/auth/<provider>/, so none is known here).
 */
interface RulePlace {
  /** How a message names it: `routes[0]`, `forwardAuth.hosts.deploy.example.com`. */
  readonly name: string
  /** What its rules' names (Rule.name) are under: `routes[0]`, `forwardAuth`. */
  readonly rulesUnder: string
  /** The provider whose people keep their plain names. */
  readonly own: string | undefined
  /** Whose tokens it takes (`bearer.issuers`). */
  readonly issuers: readonly string[]
  /** Issuers and providers whose people and tokens its rules meet besides `own`'s. */
  readonly others: readonly string[]
  readonly allow: readonly Rule[] | undefined
}

/** Every route and forward-auth host as a place rules are met. */
export function rulePlaces (config: Pick<GatewayConfig, 'routes' | 'forwardAuth'>): RulePlace[] {
  const routes = config.routes.map((route, i): RulePlace => {
    const issuers = route.bearer?.issuers ?? []
    const others = [...new Set([...route.providers, ...issuers])].filter((name) => name !== route.provider)
    return { name: `routes[${i}]`, rulesUnder: `routes[${i}]`, own: route.provider, issuers, others, allow: route.rules.allow }
  })
  const hosts = [...config.forwardAuth.hosts].map(([host, rules]): RulePlace => {
    const issuers = config.forwardAuth.bearer.get(host)?.issuers ?? []
    // Its people are those of the provider the proxy's URL names, whose tokens may be among these.
    return { name: `forwardAuth.hosts.${host}`, rulesUnder: 'forwardAuth', own: undefined, issuers, others: issuers, allow: rules.allow }
  })
  return [...routes, ...hosts]
}

/**
 * Claims of CI systems' tokens (GitHub Actions, GitLab CI) whose values every repository or project
 * can present for itself: its own `main` branch, an environment it names `production`, a push, a
 * hosted runner, its visibility, its owner's access level (everyone owns their own project), and
 * the workflow or pipeline file it runs (`job_workflow_ref`, `ci_config_ref_uri`: any repository
 * may call a public reusable workflow or include another project's pipeline, and its tokens then
 * name that file, not the caller; an outside tester's point). A rule on these alone pins nobody.
 * @see https://docs.github.com/en/actions/security-for-github-actions/security-hardening-your-deployments/about-security-hardening-with-openid-connect
 * @see https://docs.gitlab.com/ci/secrets/id_token_authentication/
 */
const ANYONES_CLAIMS = new Set(['ref', 'ref_type', 'ref_path', 'ref_protected', 'environment', 'environment_protected', 'deployment_tier',
  'event_name', 'runner_environment', 'repository_visibility', 'project_visibility', 'user_access_level', 'pipeline_source', 'sha',
  'workflow', 'workflow_sha', 'job_workflow_ref', 'job_workflow_sha', 'ci_config_ref_uri', 'ci_config_sha',
  'head_ref', 'base_ref', 'run_id', 'run_number', 'run_attempt', 'iss', 'aud', 'iat', 'nbf', 'exp', 'jti'])

/**
 * A route or host that takes a token-only issuer's tokens (CI systems, workloads) with an `allow`
 * rule that says nothing of who the caller is: no `users`, and no claim but those every repository
 * can present (ANYONES_CLAIMS). Every repository, project or pod that issuer serves then passes,
 * since the caller chooses the token's audience.
 */
export function unpinnedIssuerWarnings (places: readonly RulePlace[], providers: Readonly<Record<string, ProviderConfig>>): string[] {
  return places.flatMap((place) => {
    const issuers = place.issuers.filter((name) => Object.hasOwn(providers, name) && providers[name]!.tokenOnly)
    const pinned = (place.allow ?? []).every((rule) => rule.users.length > 0 || rule.claims.some((claim) => !ANYONES_CLAIMS.has(claim.path.replace(/^\//, ''))))
    if (issuers.length === 0 || (place.allow !== undefined && pinned)) return []
    return [`${place.name}.allow: takes tokens of ${issuers.join(', ')}, which mints them for every repository, project or pod it serves (the caller chooses the audience), ` +
      'and not every allow rule names users or a claim that tells callers apart (ref, environment, event_name and the like any repository can present for itself): ' +
      'pin who may pass, such as { claims: { repository: [org/app], ref: [refs/heads/main] } } (machine-clients.md)']
  })
}

/**
 * Routes and hosts that meet the people or tokens of an issuer besides their own provider and admit
 * by groups, e-mail addresses or domains in a rule that names no provider, or names several: only
 * user names (and subjects) are told apart by issuer (bearer.ts named), so another issuer's `admins`
 * group, or an address it vouches for, counts as the own provider's.
 */
export function sharedNameWarnings (places: readonly RulePlace[]): string[] {
  return places.flatMap((place) => {
    if (place.others.length === 0) return []
    return (place.allow ?? []).flatMap((rule) => [...sharedClaimWarning(place, rule), ...sharedByName(place, rule)])
  })
}

/**
 * A rule that admits by `claims` (and no `users`, which are told apart by issuer) at a place that
 * meets several providers' people or tokens, and names no one provider: a claim's value is its
 * issuer's own word, which another issuer can say too (an outside tester's finding: the docs'
 * GitHub Actions recipe, its repository's name and ids pinned, admitted a second GitHub's token
 * with the same values, and a partner directory's person with a claim the rule named).
 */
function sharedClaimWarning (place: RulePlace, rule: Rule): string[] {
  if (rule.claims.length === 0 || rule.users.length > 0 || rule.providers.length === 1) return []
  const parties = [...new Set([...(place.own === undefined ? [] : [place.own]), ...place.others])]
  const named = rule.claims.map((claim) => claim.path.replace(/^\//, '')).join(', ')
  return [`${place.rulesUnder}.${rule.name}: admits by claims (${named}) whoever carries those values among the people and tokens of ${parties.join(', ')}${place.own === undefined ? ' and the provider its URL names' : ''}: ` +
    'a claim\'s value is its issuer\'s own word, and another issuer can say the same (another CI system, a partner\'s directory). ' +
    'Add providers: [<the one it is for>] to the rule (machine-clients.md, "Several issuers")']
}

/** sharedNameWarnings for groups, e-mail addresses and domains. */
function sharedByName (place: RulePlace, rule: Rule): string[] {
  const by = (['groups', 'emails', 'domains'] as const).filter((key) => rule[key].length > 0)
  if (by.length === 0 || rule.providers.length === 1) return []
  if (rule.providers.length > 1) {
    const [first, second] = rule.providers
    return [`${place.rulesUnder}.${rule.name}: admits by ${by.join(' and ')} the people and tokens of ${rule.providers.join(', ')} under one rule, and only user names are told apart by issuer ` +
      `(${second}:alice): ${second}'s groups and the addresses it vouches for count as ${first}'s. Write a rule for each provider, unless they are one directory (machine-clients.md, "Several issuers")`]
  }
  const own = place.own === undefined ? 'those of the provider its URL names (/oauth/auth/<provider>/)' : `${place.own}'s`
  return [`${place.rulesUnder}.${rule.name}: admits by ${by.join(' and ')} the people and tokens of ${place.others.join(', ')} as well as ${own}, and only user names are told apart by issuer ` +
    `(${place.others[0]}:alice): another issuer's groups and the addresses it vouches for count as its own. Add providers: [${place.own ?? '<that provider>'}] to the rule to admit its people only, ` +
    'and a rule of its own for each other issuer (machine-clients.md, "Several issuers")']
}

/**
 * Routes and hosts that introspect opaque tokens of several issuers: such a token names no issuer,
 * so it goes to each one's introspection endpoint in turn until one calls it active, and each
 * issuer sees the tokens of the others listed after it (access-tokens.ts introspect).
 */
export function introspectionWarnings (config: Pick<GatewayConfig, 'routes' | 'forwardAuth'>): string[] {
  const places: Array<[string, BearerConfig | undefined]> = [
    ...config.routes.map((route, i): [string, BearerConfig | undefined] => [`routes[${i}].bearer`, route.bearer]),
    ...[...config.forwardAuth.bearer].map(([host, bearer]): [string, BearerConfig | undefined] => [`forwardAuth.hosts.${host}.bearer`, bearer]),
  ]
  return places.flatMap(([at, bearer]) => bearer?.introspect === true && bearer.issuers.length > 1
    ? [`${at}.introspect: an opaque token names no issuer, so it is introspected at ${bearer.issuers.join(', then ')} in turn until one calls it active: ` +
      `each sees the tokens of those listed after it (${bearer.issuers[0]} those of ${bearer.issuers.slice(1).join(' and ')}). Name the one issuer whose tokens are opaque (introspect: ${bearer.issuers[0]}), or list only issuers of one party (machine-clients.md)`]
    : [])
}

/**
 * One issuer however it is written: discovery reads `https://GitLab.example.com:443/` and
 * `https://gitlab.example.com` as the same (the host in lower case, the default port and a trailing
 * `/` left out), and both providers would then expect one `iss`. Also how a token's `iss` is
 * matched to the configured issuers before any discovery (src/oauth/access-tokens.ts).
 */
export function sameIssuer (issuer: string): string {
  try {
    const url = new URL(issuer)
    return `${url.protocol}//${url.host}${url.pathname.replace(/\/+$/, '')}${url.search}`
  } catch {
    return issuer
  }
}
