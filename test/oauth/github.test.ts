// GitHub's e-mail choice (src/oauth/github.ts): only the address marked both primary and verified in
// `GET /user/emails` counts, and that endpoint sits beside the configured `/user`. Organisations and
// teams (with read:org) become groups; the pages of their lists are followed only on the API's origin.
import { describe, expect, it } from 'vitest'
import { emailsUrl, nextPage, organisationGroups, primaryVerifiedEmail, readsOrganisations } from '../../src/oauth/github.js'

describe('GitHub e-mail', () => {
  it.each<[string, unknown, string | undefined]>([
    ['the primary verified address', [{ email: 'a@x.test', primary: false, verified: true }, { email: 'b@x.test', primary: true, verified: true }], 'b@x.test'],
    ['no address when the primary one is unverified', [{ email: 'a@x.test', primary: false, verified: true }, { email: 'b@x.test', primary: true, verified: false }], undefined],
    ['no address from an empty list', [], undefined],
    ['no address from something that is not a list', { email: 'b@x.test', primary: true, verified: true }, undefined],
    ['no address when verified is a string', [{ email: 'b@x.test', primary: true, verified: 'true' }], undefined],
    ['no address when email is not a string', [{ email: 1, primary: true, verified: true }, null], undefined],
  ])('%s', (_name, list, expected) => {
    expect(primaryVerifiedEmail(list)).toBe(expected)
  })

  it.each([
    ['https://api.github.com/user', 'https://api.github.com/user/emails'],
    ['https://github.example.com/api/v3/user', 'https://github.example.com/api/v3/user/emails'],
    ['https://api.github.com/user/?x=1', 'https://api.github.com/user/emails'],
  ])('/user/emails beside %s', (user, emails) => {
    expect(emailsUrl(user)).toBe(emails)
  })
})

describe('GitHub organisations and teams', () => {
  it.each<[string, string, boolean]>([
    ['the preset\'s scope', 'read:user user:email', false],
    ['read:org', 'read:user user:email read:org', true],
    ['read:org, comma-separated', 'read:user,read:org', true],
    ['admin:org covers it', 'admin:org', true],
    ['a scope that only looks like it', 'read:organization read:org2 xread:org', false],
    ['an empty scope', '', false],
  ])('%s: %s -> %s', (_name, scope, expected) => {
    expect(readsOrganisations(scope)).toBe(expected)
  })

  it('organisations by login, teams as organisation/slug, each once; malformed entries left out', () => {
    expect(organisationGroups(
      [{ login: 'acme' }, { login: 'Other-Org' }, { login: '' }, { id: 3 }, null, 'acme', { login: 'acme' }],
      [
        { slug: 'platform', organization: { login: 'acme' } },
        { slug: 'ops', organization: { login: 'Other-Org' } },
        { slug: 'platform', organization: { login: 'acme' } },
        { slug: 'no-org' },
        { slug: 7, organization: { login: 'acme' } },
        { organization: { login: 'acme' } },
        { slug: 'x', organization: 'acme' },
        null,
      ]
    )).toEqual(['acme', 'Other-Org', 'acme/platform', 'Other-Org/ops'])
  })

  const API = 'https://api.github.com'
  it.each<[string, string | null, string | undefined]>([
    ['no Link header', null, undefined],
    ['the next page', `<${API}/user/teams?per_page=100&page=2>; rel="next", <${API}/user/teams?per_page=100&page=3>; rel="last"`, `${API}/user/teams?per_page=100&page=2`],
    ['the next page after the others', `<${API}/user/teams?page=1>; rel="prev", <${API}/user/teams?page=3>; rel="next"`, `${API}/user/teams?page=3`],
    ['only a last page', `<${API}/user/teams?page=3>; rel="last"`, undefined],
    ['a next page on another host (the token would go with it)', '<https://evil.example/user/teams?page=2>; rel="next"', undefined],
    ['a next page on another port', `<${API}:8443/user/teams?page=2>; rel="next"`, undefined],
    ['a next page over plain http', '<http://api.github.com/user/teams?page=2>; rel="next"', undefined],
    ['a next page that is not a URL', '<//user/teams>; rel="next"', undefined],
    ['a relative next page', '</user/teams?page=2>; rel="next"', undefined],
    ['garbage', 'rel="next"', undefined],
  ])('%s', (_name, link, expected) => {
    expect(nextPage(link, API)).toBe(expected)
  })
})
