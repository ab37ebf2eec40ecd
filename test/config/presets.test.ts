// Provider presets resolve to the endpoints, scope and claims each provider documents (URLs cited
// in src/config/presets.ts); keys given in the file win.
import { describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/config.js'
import type { ProviderConfig } from '../../src/config/types.js'

function provider (fields: string): ProviderConfig {
  return parseConfig(`providers:\n  p:\n    clientId: c\n    clientSecret: s\n${fields}`, {}).providers.p!
}

const OIDC = { authorizeUrl: undefined, tokenUrl: undefined, userinfoUrl: undefined, openid: true }
const CLAIMS = { user: 'sub', email: 'email', name: 'name', groups: 'groups' }

describe('provider presets', () => {
  it.each<[string, string, Partial<ProviderConfig>]>([
    ['github', '    preset: github\n', {
      preset: 'github',
      issuer: undefined,
      openid: false,
      authorizeUrl: 'https://github.com/login/oauth/authorize',
      tokenUrl: 'https://github.com/login/oauth/access_token',
      userinfoUrl: 'https://api.github.com/user',
      scope: 'read:user user:email',
      claims: { ...CLAIMS, user: 'login' },
    }],
    ['GitHub Enterprise Server', '    preset: github\n    baseUrl: https://github.example.com/\n', {
      authorizeUrl: 'https://github.example.com/login/oauth/authorize',
      tokenUrl: 'https://github.example.com/login/oauth/access_token',
      userinfoUrl: 'https://github.example.com/api/v3/user',
    }],
    ['gitlab', '    preset: gitlab\n', { ...OIDC, issuer: 'https://gitlab.com', scope: 'openid profile email', claims: { ...CLAIMS, user: 'nickname' } }],
    ['self-managed GitLab', '    preset: gitlab\n    baseUrl: https://gitlab.example.com\n', { issuer: 'https://gitlab.example.com' }],
    ['google', '    preset: google\n', { ...OIDC, issuer: 'https://accounts.google.com', scope: 'openid email profile', claims: { ...CLAIMS, user: 'email' } }],
    ['microsoft', '    preset: microsoft\n    tenant: 72f988bf-86f1-41af-91ab-2d7cd011db47\n', {
      ...OIDC, issuer: 'https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/v2.0', scope: 'openid profile email', claims: { ...CLAIMS, user: 'preferred_username' },
    }],
    ['keycloak by base URL and realm', '    preset: keycloak\n    baseUrl: https://kc.example.com\n    realm: staff\n', {
      ...OIDC, issuer: 'https://kc.example.com/realms/staff', scope: 'openid profile email', claims: { ...CLAIMS, user: 'preferred_username' },
    }],
    ['microsoft with an explicit issuer needs no tenant', '    preset: microsoft\n    issuer: https://login.microsoftonline.com/contoso.onmicrosoft.com/v2.0\n', {
      ...OIDC, issuer: 'https://login.microsoftonline.com/contoso.onmicrosoft.com/v2.0', claims: { ...CLAIMS, user: 'preferred_username' },
    }],
    ['self-managed GitLab under a relative URL root', '    preset: gitlab\n    baseUrl: https://example.com/gitlab/\n', { issuer: 'https://example.com/gitlab' }],
    ['keycloak by issuer', '    preset: keycloak\n    issuer: https://kc.example.com/realms/staff\n', { issuer: 'https://kc.example.com/realms/staff' }],
  ])('%s', (_name, fields, expected) => {
    expect(provider(fields)).toMatchObject({ endSession: true, pkce: true, ...expected })
  })

  it('explicit keys win over the preset, claims key by key', () => {
    expect(provider('    preset: github\n    scope: read:user\n    userinfoUrl: https://api.github.com/user?x=1\n    claims: { email: contact.email }\n    endSession: false\n')).toMatchObject({
      scope: 'read:user',
      userinfoUrl: 'https://api.github.com/user?x=1',
      authorizeUrl: 'https://github.com/login/oauth/authorize',
      claims: { user: 'login', email: 'contact.email', name: 'name', groups: 'groups' },
      endSession: false,
    })
  })

  it('without a preset nothing is filled and endSession defaults to true', () => {
    const p = provider('    issuer: https://op.example.org\n    scope: openid\n')
    expect(p.preset).toBeUndefined()
    expect(p).toMatchObject({ scope: 'openid', claims: CLAIMS, endSession: true, userinfoUrl: undefined })
  })

  it.each([['common'], ['organizations'], ['consumers']])('microsoft refuses the multi-tenant value %s', (tenant) => {
    expect(() => provider(`    preset: microsoft\n    tenant: ${tenant}\n`)).toThrow(`providers.p.tenant: must name one tenant, got "${tenant}"`)
  })

  it('keycloak without issuer or base URL names the issuer', () => {
    expect(() => provider('    preset: keycloak\n')).toThrow('providers.p.issuer: is required with preset keycloak')
  })
})
