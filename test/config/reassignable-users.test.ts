// `--check` warns where an `allow` rule's `users` entry is a user name another account can come to
// hold: entries are matched against the provider's subject, so on a provider whose
// `claims.user` is `preferred_username` (keycloak, microsoft), GitHub's `login` or another claim, such
// an entry admits nobody. A table of providers and entries, with the exact warnings.
import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { parseConfig } from '../../src/config/config.js'
import { configWarnings } from '../../src/config/safety.js'
import { TEST_SECRET } from '../helpers/gateway.js'

const PLAIN = { clientId: 'c', clientSecret: 's', authorizeUrl: 'https://op.example/a', tokenUrl: 'https://op.example/t', userinfoUrl: 'https://op.example/u', scope: 'read' }
const PROVIDERS: Record<string, Record<string, unknown>> = {
  plain: PLAIN,
  named: { ...PLAIN, claims: { user: 'username' } },
  mail: { ...PLAIN, claims: { user: 'email' } },
  keycloak: { preset: 'keycloak', issuer: 'https://kc.example/realms/r', clientId: 'c', clientSecret: 's' },
  microsoft: { preset: 'microsoft', tenant: '72f988bf-86f1-41af-91ab-2d7cd011db47', clientId: 'c', clientSecret: 's' },
  github: { preset: 'github', clientId: 'c', clientSecret: 's' },
  google: { preset: 'google', clientId: 'c', clientSecret: 's' },
}

function warnings (provider: string, rules: Record<string, unknown>, forwardAuth?: Record<string, unknown>): string[] {
  const text = stringify({
    session: { secret: TEST_SECRET },
    providers: { [provider]: PROVIDERS[provider] },
    routes: [{ path: '/app/', upstream: 'http://127.0.0.1:9100', provider, ...rules }],
    // The proxy in front, which forwardAuth.hosts needs to be trusted.
    ...(forwardAuth ? { forwardAuth, server: { trustProxy: ['10.0.0.5'] } } : {}),
  })
  return configWarnings(parseConfig(text, {})).filter((warning) => warning.includes('.users: '))
}

const because = (user: string, write: string) => `entries are matched against the provider's subject (sub), not its user name (${user}), which another account can come to hold; write ${write}`

type Row = [what: string, provider: string, rules: Record<string, unknown>, expected: string[]]

const TABLE: Row[] = [
  ['keycloak: a user name', 'keycloak', { allow: [{ users: ['alice', '0b6e2c4a-5c8e-4c44-9f2b-1e7b3a9c0d11'] }] },
    [`routes[0].allow[0].users: "alice" admits nobody at provider keycloak: ${because('preferred_username', 'the Keycloak user\'s ID (a UUID)')}`]],
  ['microsoft: a user name', 'microsoft', { allow: [{ groups: ['g'] }, { users: ['alice@contoso.com', 'alice', 'AAAAAAAAAAAAAAAAAAAAAIkzqFVrSaSaFHy782bbtaQ'] }] },
    [`routes[0].allow[1].users: "alice" admits nobody at provider microsoft: ${because('preferred_username', 'the ID token\'s sub (43 characters, one per person and application)')}`]],
  ['github: a login', 'github', { allow: [{ users: ['octocat', '583231'] }] },
    [`routes[0].allow[0].users: "octocat" admits nobody at provider github: ${because('login', 'the GitHub account\'s numeric id (https://api.github.com/users/<login>)')}`]],
  ['another claim, no preset', 'named', { allow: [{ users: ['alice'] }] },
    [`routes[0].allow[0].users: "alice" admits nobody at provider named: ${because('username', 'the person\'s sub')}`]],
  ['the default mapping (sub): no warning', 'plain', { allow: [{ users: ['alice'] }] }, []],
  ['the e-mail as the user name: no warning', 'mail', { allow: [{ users: ['alice'] }] }, []],
  ['google (the e-mail): no warning', 'google', { allow: [{ users: ['alice@example.org'] }] }, []],
  ['a deny rule holds by either form: no warning', 'keycloak', { deny: [{ users: ['alice'] }] }, []],
  ['the earlier object form names its rule allow', 'keycloak', { allow: { users: ['alice'] } },
    [`routes[0].allow.users: "alice" admits nobody at provider keycloak: ${because('preferred_username', 'the Keycloak user\'s ID (a UUID)')}`]],
]

describe('users entries on a provider whose user name is reassignable', () => {
  it.each(TABLE)('%s', (_what, provider, rules, expected) => {
    expect(warnings(provider, rules)).toEqual(expected)
  })

  it('forward-auth host rules judge any provider: warned at the host\'s key path', () => {
    expect(warnings('github', {}, { hosts: { 'wiki.example.com': { allow: [{ users: ['octocat'] }] } } }))
      .toEqual([`forwardAuth.hosts.wiki.example.com.allow[0].users: "octocat" admits nobody at provider github: ${because('login', 'the GitHub account\'s numeric id (https://api.github.com/users/<login>)')}`])
  })
})
