// Two routes of different providers in front of one upstream each send it their own provider's
// people by plain name (`alice`), so alice of corp and alice of partner look the same there:
// `--check` warns, once per upstream, and is silent where names cannot meet.
import { stringify } from 'yaml'
import { describe, expect, it } from 'vitest'
import { configWarnings, parseConfig } from '../../src/config/config.js'
import { upstreamNameWarnings } from '../../src/config/upstream-names.js'
import { TEST_SECRET } from '../helpers/gateway.js'

const PROVIDERS = {
  corp: { clientId: 'c', clientSecret: 's', issuer: 'https://corp.example', scope: 'openid' },
  partner: { clientId: 'p', clientSecret: 's', issuer: 'https://partner.example', scope: 'openid' },
  ci: { issuer: 'https://ci.example' },
}

const warnings = (routes: Array<Record<string, unknown>>): string[] => upstreamNameWarnings(parseConfig(stringify({
  session: { secret: TEST_SECRET },
  providers: PROVIDERS,
  routes: routes.map((route, i) => ({ path: `/r${i}/`, ...route })),
}), {}))

describe('one upstream behind routes of several providers', () => {
  it.each<[string, Array<Record<string, unknown>>, RegExp]>([
    ['two routes of two providers', [{ upstream: 'http://app:3000', provider: 'corp' }, { upstream: 'http://app:3000', provider: 'partner' }],
      /^routes\[0\] \(corp\), routes\[1\] \(partner\): http:\/\/app:3000 gets the people of corp and partner by their plain names.*alice of corp and alice of partner look the same.*providers: \[corp, partner\].*partner:alice/],
    ['the upstream spelled otherwise: host case, default port, a trailing slash', [{ upstream: 'http://APP:80', provider: 'corp' }, { upstream: 'http://app/', provider: 'partner', rewritePrefix: '/b/' }],
      /^routes\[0\] \(corp\), routes\[1\] \(partner\): http:\/\/app gets/],
    ['machine clients of another issuer on the second route do not change whose names it sends plainly', [{ upstream: 'http://app:3000', provider: 'corp' }, { upstream: 'http://app:3000', provider: 'partner', bearer: { issuers: ['ci'], audience: 'a' } }],
      /^routes\[0\] \(corp\), routes\[1\] \(partner\): http:\/\/app:3000 gets the people of corp and partner/],
  ])('%s: warns', (_name, routes, says) => {
    expect(warnings(routes)).toEqual([expect.stringMatching(says)])
  })

  it.each<[string, Array<Record<string, unknown>>]>([
    ['one provider on every route', [{ upstream: 'http://app:3000', provider: 'corp' }, { upstream: 'http://app:3000', provider: 'corp', bearer: { issuers: ['ci'], audience: 'a' } }]],
    ['other upstreams (another port, host or scheme)', [{ upstream: 'http://app:3000', provider: 'corp' }, { upstream: 'http://app:3001', provider: 'partner' }, { upstream: 'https://app:3000', provider: 'partner' }, { upstream: 'http://other:3000', provider: 'partner' }]],
    ['one route of two providers (the second one\'s people are qualified)', [{ upstream: 'http://app:3000', providers: ['corp', 'partner'] }]],
    ['a public route beside them names nobody', [{ upstream: 'http://app:3000', provider: 'corp' }, { upstream: 'http://app:3000', auth: 'none' }]],
  ])('%s: no warning', (_name, routes) => {
    expect(warnings(routes)).toEqual([])
  })

  it('is one of the warnings --check prints, once per upstream', () => {
    const config = parseConfig(stringify({
      session: { secret: TEST_SECRET },
      providers: PROVIDERS,
      routes: [
        { path: '/a/', upstream: 'http://app:3000', provider: 'corp' },
        { path: '/b/', upstream: 'http://app:3000', provider: 'partner' },
        { path: '/c/', upstream: 'http://app:3000/', provider: 'partner', rewritePrefix: '/c/' },
      ],
    }), {})
    expect(configWarnings(config).filter((warning) => warning.includes('by their plain names'))).toEqual([expect.stringMatching(/^routes\[0\] \(corp\), routes\[1\] \(partner\), routes\[2\] \(partner\): http:\/\/app:3000 gets/)])
  })
})
