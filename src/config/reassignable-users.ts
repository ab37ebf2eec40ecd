// `users:` entries on a provider whose user name another account can come to hold.
// A rule's `users` entry admits by the provider's stable subject (`sub`; GitHub: the numeric id), or
// by the user name only where that is the person's verified e-mail address (src/access/rules.ts).
// Where `claims.user` is another claim (`preferred_username` of the keycloak and microsoft presets,
// GitHub's `login`, GitLab's `nickname`), an `allow` entry written as a user name admits nobody:
// `--check` says so, once per entry, and names the subject to write instead.
import type { ClaimsMapping, GatewayConfig, PresetName, ProviderConfig, Rule } from './types.js'

/** What each preset's subject looks like, and how to name it in the warning. */
const SUBJECTS: Partial<Record<PresetName, { shape: RegExp, what: string }>> = {
  keycloak: { shape: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, what: 'the Keycloak user\'s ID (a UUID)' },
  microsoft: { shape: /^[A-Za-z0-9_-]{43}$/, what: 'the ID token\'s sub (43 characters, one per person and application)' },
  github: { shape: /^[1-9]\d*$/, what: 'the GitHub account\'s numeric id (https://api.github.com/users/<login>)' },
  gitlab: { shape: /^[1-9]\d*$/, what: 'the GitLab user\'s numeric id' },
}

/** Whether the mapped user name is the subject itself or the (verified) e-mail address: no other account can hold it. */
function stableUserName (claims: ClaimsMapping): boolean {
  const user = claims.user.replace(/^\//, '')
  return user === 'sub' || user === 'email' || claims.user === claims.email
}

/** The warnings for one `allow` rule judged at `providers`; `at` is the rule's key path. */
function ruleWarnings (rule: Rule, at: string, providers: readonly ProviderConfig[]): string[] {
  const warnings: string[] = []
  for (const provider of providers) {
    if (stableUserName(provider.claims)) continue
    const subject = provider.preset === undefined ? undefined : SUBJECTS[provider.preset]
    for (const entry of rule.users) {
      if (subject?.shape.test(entry) === true || entry.includes('@')) continue
      warnings.push(`${at}.users: ${JSON.stringify(entry)} admits nobody at provider ${provider.name}: entries are matched against the provider's subject (sub), ` +
        `not its user name (${provider.claims.user}), which another account can come to hold; write ${subject?.what ?? 'the person\'s sub'}`)
    }
  }
  return warnings
}

/**
 * One warning per `allow` entry of `users` that looks like a reassignable user name rather than a
 * subject, on routes (their provider) and forward-auth hosts (any provider).
 */
export function reassignableUserWarnings (config: GatewayConfig): string[] {
  const all = Object.values(config.providers)
  const warnings = config.routes.flatMap((route, i) => {
    const providers = route.provider === undefined ? all : all.filter((provider) => provider.name === route.provider)
    return (route.rules.allow ?? []).flatMap((rule) => ruleWarnings(rule, `routes[${i}].${rule.name}`, providers))
  })
  for (const rules of config.forwardAuth.hosts.values()) {
    for (const rule of rules.allow ?? []) warnings.push(...ruleWarnings(rule, `forwardAuth.${rule.name}`, all))
  }
  return warnings
}
