// The names the proxy writes as claim headers and the names it drops from clients agree: for any
// configured claim header name, the upstream request of a signed-in person carries it under that
// name (lower case), and no spelling of it a client sends (`_` or `.` for `-`, any letter case)
// reaches the upstream of any route: the protected route that sends it, another protected route,
// or an `auth: none` route. A property (fast-check) over generated names, on the header rewrite
// itself (src/proxy/request-headers.ts) with the config as the gateway reads it.
import fc from 'fast-check'
import type { IncomingHttpHeaders } from 'node:http'
import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { claimHeaderValues } from '../../src/access/identity-headers.js'
import { ConfigError, parseConfig } from '../../src/config/config.js'
import type { GatewayConfig, RouteConfig } from '../../src/config/types.js'
import { UpstreamHeaders, type ForwardedRequest } from '../../src/proxy/request-headers.js'
import type { Identity } from '../../src/session/record.js'
import { TEST_SECRET } from '../helpers/gateway.js'

/** The config with `names` as the claim headers of /app/ (claim `c<i>` each); undefined when the config refuses a name. */
function configWith (names: readonly string[]): GatewayConfig | undefined {
  try {
    return parseConfig(stringify({
      session: { secret: TEST_SECRET },
      providers: { demo: { clientId: 'c', clientSecret: 's', authorizeUrl: 'http://127.0.0.1:1/a', tokenUrl: 'http://127.0.0.1:1/t', scope: 'read' } },
      routes: [
        { path: '/app/', upstream: 'http://127.0.0.1:2', provider: 'demo', headers: Object.fromEntries(names.map((name, i) => [name, `claims.c${i}`])) },
        { path: '/other/', upstream: 'http://127.0.0.1:3', provider: 'demo' },
        { path: '/open/', upstream: 'http://127.0.0.1:4', auth: 'none' },
      ],
    }), {}, 'test.yaml')
  } catch (error) {
    if (error instanceof ConfigError) return undefined
    throw error
  }
}

/** A signed-in request to `route`, with the claim headers the access hook would put on it. */
function signedIn (route: RouteConfig, identity: Identity): ForwardedRequest {
  const claims = claimHeaderValues(identity, route.headers)
  if (!claims.ok) throw new Error(`unexpected refusal of ${claims.header}`)
  return { protocol: 'http', ips: undefined, socket: { remoteAddress: '127.0.0.1' }, allowed: { accessToken: 'token', keepAuthorization: false, identity, assertion: undefined, claimHeaders: claims.headers } }
}

const word = fc.stringMatching(/^[A-Za-z0-9]{1,6}$/)
/** A header name as an operator writes it: words joined by `-`, X- first or not. */
const headerName = fc.tuple(fc.boolean(), fc.array(word, { minLength: 1, maxLength: 4 }))
  .map(([prefixed, words]) => [...(prefixed ? ['X'] : []), ...words].join('-'))
/** A client's spelling of `name`: each `-` as `-`, `_` or `.`, each letter in either case; lower-cased as Node gives it. */
const spellingOf = (name: string) => fc.tuple(
  fc.array(fc.constantFrom('-', '_', '.'), { minLength: name.length, maxLength: name.length }),
  fc.array(fc.boolean(), { minLength: name.length, maxLength: name.length })
).map(([joints, upper]) => [...name].map((char, i) => (char === '-' ? joints[i]! : upper[i]! ? char.toUpperCase() : char.toLowerCase())).join(''))

describe('claim header names, written and dropped', () => {
  it('every configured name is written as configured, and every spelling of it a client sends is dropped on every route', () => {
    const scenario = fc.uniqueArray(headerName, { minLength: 1, maxLength: 4, selector: (name) => name.toLowerCase() })
      .chain((names) => fc.tuple(fc.constant(names), fc.array(fc.nat({ max: names.length - 1 }).chain((i) => spellingOf(names[i]!)), { minLength: 1, maxLength: 8 })))
    let checked = 0
    fc.assert(fc.property(scenario, ([names, spellings]) => {
      const config = configWith(names)
      // A name the config refuses (reserved, such as Connection) is never written: nothing to agree on.
      fc.pre(config !== undefined)
      checked++
      const rewriter = new UpstreamHeaders(config!, ['gw_session'])
      const identity: Identity = { sub: 'alice', groups: [], claims: Object.fromEntries(names.map((_name, i) => [`c${i}`, [`value${i}`]])) }
      const client: IncomingHttpHeaders = Object.fromEntries(spellings.map((spelling) => [spelling.toLowerCase(), 'spoofed']))
      const [app, other, open] = config!.routes as [RouteConfig, RouteConfig, RouteConfig]

      const written = rewriter.rewrite(app, signedIn(app, identity), {})
      const claimNames = Object.keys(written).filter((name) => String(written[name]).startsWith('value'))
      expect(claimNames.sort()).toEqual(names.map((name) => name.toLowerCase()).sort())

      for (const [route, request] of [[app, signedIn(app, identity)], [other, signedIn(other, identity)], [open, signedIn(open, identity)]] as const) {
        const out = rewriter.rewrite(route, request, client)
        expect(Object.entries(out).filter(([, value]) => String(value).includes('spoofed'))).toEqual([])
      }
    }), { numRuns: 300 })
    expect(checked).toBeGreaterThan(200)
  })
})
