// Security round 4: list-valued headers never carry a value that holds the separator. A group or
// role named `viewer,admin` (or ` admin`, which an application trims, or `a;b`, or one with a `"`
// that a quoted-string reader would join across commas) must never reach an application that
// splits X-Forwarded-Groups or a claim header on `,` as a role the provider never gave. Each element
// is percent-encoded there (`%`, `,`, `;`, `"`, and white space at its ends): end to end through a
// real provider, the proxy's upstream request and forward-auth's answer; then a property over any
// list of values, on the functions the proxy and forward-auth both call.
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { claimHeaderValues, DEFAULT_IDENTITY_HEADERS, identityHeaders, listHeaderValue } from '../../src/access/identity-headers.js'
import { Browser } from '../helpers/browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { rawRequest } from '../helpers/raw-http.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

/** Hostile role names, and how each one travels. */
const HOSTILE: ReadonlyArray<readonly [role: string, sent: string]> = [
  ['viewer,admin', 'viewer%2Cadmin'],
  [' admin', '%20admin'],
  ['admin ', 'admin%20'],
  ['viewer, admin', 'viewer%2C admin'],
  ['viewer;admin', 'viewer%3Badmin'],
  ['"x', '%22x'],
  ['y"', 'y%22'],
  ['100%', '100%25'],
  ['viewer%2Cadmin', 'viewer%252Cadmin'],
  ['\u00a0admin', '%C2%A0admin'],
  ['admin\u3000', 'admin%E3%80%80'],
  ['Domain Users', 'Domain Users'],
  ['staff', 'staff'],
]
const ROLES = HOSTILE.map(([role]) => role)
/**
 * The groups: the same without white space at an element's ends, which the gateway trims off a
 * provider's groups when it reads them (src/oauth/claims.ts), as rules compare them.
 */
const TEAMS = HOSTILE.filter(([role]) => role.trim() === role)

let redis: TestRedis
let op: TestProvider
let upstream: Upstream
let gateway: TestGateway
let cookie: string

beforeAll(async () => {
  redis = await startRedis()
  upstream = await startUpstream()
  const server = await reserveBaseUrl()
  op = await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: [`${server.baseUrl}/oauth/authorized/demo/`] }], {
    scopeClaims: { openid: ['sub', 'roles', 'teams'], profile: ['name'], email: ['email', 'email_verified'], groups: ['groups'] },
    extraClaims: () => ({ roles: ROLES, teams: TEAMS.map(([team]) => team) }),
  })
  gateway = await startGateway({
    server,
    store: { type: 'redis', url: redis.url },
    providers: { demo: { ...oidcClient(op.issuer, 'c', 's', 'openid email'), claims: { groups: 'teams' } } },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo', headers: { 'X-Roles': 'claims.roles' } }],
  })
  const browser = new Browser()
  expect((await browser.navigate(`${gateway.url}/app/x`, { login: 'carol' })).status).toBe(200)
  cookie = browser.cookieHeader(`${gateway.url}/`)!
})

afterAll(async () => {
  await gateway?.close()
  await Promise.all([op?.close(), upstream?.close()])
  await redis?.release()
})

/** What an application that splits a list header reads: each element between `,` (or `;`), trimmed. */
function split (value: string): string[] {
  return value.split(/[,;]/).map((element) => element.trim())
}

describe('list headers with hostile elements, end to end', () => {
  it('the upstream gets every role percent-encoded in X-Forwarded-Groups and the claim header: never `admin`', async () => {
    const before = upstream.seen.length
    const response = await rawRequest(gateway.config.server.port, '/app/y', [`Cookie: ${cookie}`])
    expect(response.status).toBe(200)
    const headers = upstream.seen.slice(before)[0]!.headers
    for (const [name, list] of [['x-forwarded-groups', TEAMS], ['x-roles', HOSTILE]] as const) {
      const value = Buffer.from(headers[name] as string, 'latin1').toString('utf8')
      expect(value).toBe(list.map(([, sent]) => sent).join(','))
      expect(split(value)).not.toContain('admin')
      expect(split(value).map(decodeURIComponent)).toEqual(list.map(([role]) => role))
    }
  })

  it('forward-auth answers with the same encoding in X-Forwarded-Groups', async () => {
    const response = await fetch(`${gateway.url}/oauth/auth/demo/`, { headers: { cookie } })
    expect(response.status).toBe(200)
    const value = Buffer.from(response.headers.get('x-forwarded-groups')!, 'latin1').toString('utf8')
    expect(value).toBe(TEAMS.map(([, sent]) => sent).join(','))
    expect(split(value)).not.toContain('admin')
  })
})

/** Characters a list reader treats specially, white space of several kinds, and ordinary text. */
const hostileChar = fc.constantFrom(',', ';', '"', '%', ' ', '\u00a0', '\u2003', '\u3000', '\ufeff', '\u0085', '=', '\\', 'a', 'B', '0', 'é', '日', '🚀')
const element = fc.array(hostileChar, { maxLength: 8 }).map((chars) => chars.join(''))

describe('list headers: property', () => {
  it('splitting on `,` or `;` and trimming yields exactly the encoded elements, each decoding to its original', () => {
    fc.assert(fc.property(fc.array(element, { minLength: 1, maxLength: 6 }), (values) => {
      const groups = identityHeaders({ sub: 'u', groups: values }, DEFAULT_IDENTITY_HEADERS, {} as Record<string, string>)['x-forwarded-groups']
      const claims = claimHeaderValues({ sub: 'u', groups: [], claims: { roles: values } }, [{ name: 'x-roles', claim: 'roles' }])
      expect(claims.ok).toBe(true)
      const claim = claims.ok ? claims.headers[0]![1] : ''
      // The headers as an upstream reads them (UTF-8 bytes), and the joined text before it goes as bytes.
      const utf8 = (header: string | undefined): string => Buffer.from(header!, 'latin1').toString('utf8')
      for (const text of [utf8(groups), utf8(claim), listHeaderValue(values)]) {
        // Split on `,` alone or on `;` too: the same elements, and trimming changes none of them.
        expect(text.split(',')).toEqual(split(text))
        expect(split(text).map(decodeURIComponent)).toEqual(values)
      }
    }), { numRuns: 500 })
  })
})
