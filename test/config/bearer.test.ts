// `bearer:` as gateway.yaml writes it: what a good block reads as (its defaults), and a table of
// hostile or mistaken blocks, each refused with exactly one `--check` problem at its key path and
// line, never a route that accepts tokens it cannot check or silently accepts none.
import { describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/config.js'
import { configProblems } from '../helpers/config.js'
import { TEST_SECRET } from '../helpers/gateway.js'

/** Lines 1-4; `github` is a plain OAuth 2.0 provider (no `issuer`, so no keys to verify a token with). */
const HEAD = `session: { secret: ${TEST_SECRET} }
providers:
  corp: { issuer: https://login.example.com, clientId: c, clientSecret: s, scope: openid email }
  github: { preset: github, clientId: c, clientSecret: s }
`

/** A route whose `bearer:` key is on line 9 and whose block's own keys start on line 10. */
function route (bearer: string, { provider = 'provider: corp' } = {}): string {
  return `${HEAD}routes:
  - path: /api/
    upstream: http://127.0.0.1:9100
    ${provider}
    bearer:
${bearer.trim().split('\n').map((line) => `      ${line}`).join('\n')}
`
}

/** A forward-auth host whose `bearer:` key is on line 8 and whose block's keys start on line 9. */
function host (bearer: string): string {
  return `${HEAD}forwardAuth:
  hosts:
    api.example.com:
      bearer:
${bearer.trim().split('\n').map((line) => `        ${line}`).join('\n')}
server:
  trustProxy: [10.0.0.5]
`
}

describe('a bearer block as read', () => {
  it('defaults its issuers to the route\'s provider, its header to authorization, no scopes, no introspection', () => {
    const config = parseConfig(route('audience: api://orders'), {})
    expect(config.routes[0]!.bearer).toEqual({ audience: 'api://orders', issuers: ['corp'], scopes: [], header: 'authorization', introspect: false, claimsFrom: 'token' })
  })

  it('keeps what is given, with the audience trimmed and each issuer once', () => {
    const config = parseConfig(route(`
audience: " api://orders "
issuers: [corp, corp]
scopes: [orders.read, orders.write]
header: proxy-authorization
introspect: true`), {})
    expect(config.routes[0]!.bearer).toEqual({ audience: 'api://orders', issuers: ['corp'], scopes: ['orders.read', 'orders.write'], header: 'proxy-authorization', introspect: true, claimsFrom: 'token' })
    expect(parseConfig(route('audience: api://orders\nintrospect: " corp "'), {}).routes[0]!.bearer).toMatchObject({ introspect: 'corp' })
  })

  it('reads claimsFrom, and an empty one (null) as the default, token', () => {
    expect(parseConfig(route('audience: api://orders\nclaimsFrom: userinfo'), {}).routes[0]!.bearer).toMatchObject({ claimsFrom: 'userinfo' })
    expect(parseConfig(route('audience: api://orders\nclaimsFrom: introspection'), {}).routes[0]!.bearer).toMatchObject({ claimsFrom: 'introspection' })
    expect(parseConfig(route('audience: api://orders\nclaimsFrom: null'), {}).routes[0]!.bearer).toMatchObject({ claimsFrom: 'token' })
  })

  it('reads a forward-auth host\'s block that names its issuers', () => {
    const config = parseConfig(host('audience: api://orders\nissuers: [corp]'), {})
    expect(config.forwardAuth.bearer.get('api.example.com')).toMatchObject({ audience: 'api://orders', issuers: ['corp'] })
  })
})

describe('a hostile or mistaken bearer block is one problem at its key path and line', () => {
  it.each([
    ['no audience', route('scopes: [orders.read]'),
      'routes[0].bearer.audience: is required (line 9)'],
    ['an empty audience', route('audience: ""'),
      'routes[0].bearer.audience: must not be empty (line 10)'],
    ['an audience of spaces', route('audience: "  "'),
      'routes[0].bearer.audience: must name the audience the tokens are issued for, such as api://orders (line 10)'],
    ['an issuer that names no provider', route('audience: api://orders\nissuers: [crop]'),
      'routes[0].bearer.issuers[0]: names no configured provider: "crop"; did you mean `corp`? (line 11)'],
    // A newcomer's reading: the route's misspelled provider was told twice, once at a key the file does not hold.
    ['a route provider that names no provider, which the issuers default to', route('audience: api://orders', { provider: 'provider: crop' }),
      'routes[0].provider: names no configured provider; did you mean `corp`? (line 8)'],
    ['an issuer without `issuer` (a preset with no discovery)', route('audience: api://orders\nissuers: [github]'),
      'routes[0].bearer.issuers[0]: names provider github, which has no `issuer`: without OIDC discovery there are no keys to verify its tokens with; set the provider\'s issuer (its discovery document must list jwks_uri), or name in `issuers` providers that have one (without `issuers`, the route\'s providers are used) (line 11)'],
    ['a default issuer without `issuer` (the route\'s provider)', route('audience: api://orders', { provider: 'provider: github' }),
      'routes[0].bearer.issuers[0]: names provider github, which has no `issuer`: without OIDC discovery there are no keys to verify its tokens with; set the provider\'s issuer (its discovery document must list jwks_uri), or name in `issuers` providers that have one (without `issuers`, the route\'s providers are used) (line 9)'],
    ['an empty list of issuers', route('audience: api://orders\nissuers: []'),
      'routes[0].bearer.issuers: must be a non-empty list of provider names, got an empty list (line 11)'],
    ['bearer on an auth: none route', route('audience: api://orders\nissuers: [corp]', { provider: 'auth: none' }),
      'routes[0].bearer: needs auth: required (a public route checks no token) (line 9)'],
    ['a scope with a space (two scopes in one string)', route('audience: api://orders\nscopes: ["orders.read orders.write"]'),
      'routes[0].bearer.scopes[0]: must be one scope, without spaces or quotes, got "orders.read orders.write" (line 11)'],
    ['a scope with a quote (it would break the challenge header)', route('audience: api://orders\nscopes: [\'orders"read\']'),
      'routes[0].bearer.scopes[0]: must be one scope, without spaces or quotes, got "orders\\"read" (line 11)'],
    ['scopes as one string', route('audience: api://orders\nscopes: orders.read'),
      'routes[0].bearer.scopes: must be a list of strings, got "orders.read" (line 11)'],
    ['a header that is neither of the two', route('audience: api://orders\nheader: x-token'),
      'routes[0].bearer.header: must be one of authorization, proxy-authorization, got "x-token" (line 11)'],
    ['the header name capitalised', route('audience: api://orders\nheader: Authorization'),
      'routes[0].bearer.header: must be one of authorization, proxy-authorization, got "Authorization"; did you mean `authorization`? (line 11)'],
    ['introspect neither a flag nor an issuer', route('audience: api://orders\nintrospect: "yes"'),
      'routes[0].bearer.introspect: names "yes", which is not one of issuers (corp); name one of issuers, or true for each of them (line 11)'],
    ['introspect a number', route('audience: api://orders\nintrospect: 1'),
      'routes[0].bearer.introspect: must be true, false or the name of one of `issuers`, got 1 (line 11)'],
    ['introspect naming a provider not in issuers', route('audience: api://orders\nissuers: [corp]\nintrospect: github'),
      'routes[0].bearer.introspect: names "github", which is not one of issuers (corp); name one of issuers, or true for each of them (line 12)'],
    ['a forward-auth host introspecting a provider it does not list', host('audience: api://orders\nintrospect: corp'),
      'forwardAuth.hosts.api.example.com.bearer.introspect: names "corp", which is not one of issuers (none listed); list the provider in issuers too (line 10)'],
    ['an unknown key (scope for scopes)', route('audience: api://orders\nscope: [orders.read]'),
      'routes[0].bearer.scope: unknown key; did you mean `scopes`? (line 11)'],
    ['bearer as a string', route('').replace('    bearer:\n', '    bearer: api://orders\n'),
      'routes[0].bearer: must be a mapping, got "api://orders" (line 9)'],
    ['a forward-auth host without audience', host('issuers: [corp]'),
      'forwardAuth.hosts.api.example.com.bearer.audience: is required (line 8)'],
    ['a forward-auth host\'s header', host('audience: api://orders\nissuers: [corp]\nheader: x-token'),
      'forwardAuth.hosts.api.example.com.bearer.header: must be one of authorization, proxy-authorization, got "x-token" (line 11)'],
    ['a forward-auth host\'s scope with a space', host('audience: api://orders\nissuers: [corp]\nscopes: ["a b"]'),
      'forwardAuth.hosts.api.example.com.bearer.scopes[0]: must be one scope, without spaces or quotes, got "a b" (line 11)'],
    ['a forward-auth host\'s unknown key', host('audience: api://orders\nissuers: [corp]\nintrospection: true'),
      'forwardAuth.hosts.api.example.com.bearer.introspection: unknown key; did you mean `introspect`? (line 11)'],
    ['claimsFrom capitalised (userInfo)', route('audience: api://orders\nclaimsFrom: userInfo'),
      'routes[0].bearer.claimsFrom: must be one of token, userinfo, introspection, got "userInfo"; did you mean `userinfo`? (line 11)'],
    ['claimsFrom a source the gateway does not read (id_token)', route('audience: api://orders\nclaimsFrom: id_token'),
      'routes[0].bearer.claimsFrom: must be one of token, userinfo, introspection, got "id_token" (line 11)'],
    ['claimsFrom empty', route('audience: api://orders\nclaimsFrom: ""'),
      'routes[0].bearer.claimsFrom: must be one of token, userinfo, introspection, got "" (line 11)'],
    ['claimsFrom with a trailing space', route('audience: api://orders\nclaimsFrom: "userinfo "'),
      'routes[0].bearer.claimsFrom: must be one of token, userinfo, introspection, got "userinfo "; did you mean `userinfo`? (line 11)'],
    ['claimsFrom as a list of sources', route('audience: api://orders\nclaimsFrom: [userinfo, introspection]'),
      'routes[0].bearer.claimsFrom: must be one of token, userinfo, introspection, got a list (line 11)'],
    ['claimsFrom a boolean', route('audience: api://orders\nclaimsFrom: true'),
      'routes[0].bearer.claimsFrom: must be one of token, userinfo, introspection, got true (line 11)'],
    ["a forward-auth host's claimsFrom", host('audience: api://orders\nissuers: [corp]\nclaimsFrom: session'),
      'forwardAuth.hosts.api.example.com.bearer.claimsFrom: must be one of token, userinfo, introspection, got "session" (line 11)'],
  ])('%s', (_what, text, problem) => {
    expect(configProblems(text)).toEqual([problem])
  })
})
