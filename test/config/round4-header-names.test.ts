// Security round 4: a header the gateway fills with who the user is (a claim header, an identity
// header, the assertion header) may not be one an application trusts to say what the request is:
// its body (Content-*), where it came from (Origin, Referer, Sec-* that only browsers set,
// X-Requested-With), or its method (X-HTTP-Method-Override and kin). Refused like Host, in any
// letter case; the `_` spelling is refused by the name rule already. Exact messages, naming the key.
import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { configProblems } from '../helpers/config.js'
import { TEST_SECRET } from '../helpers/gateway.js'

const PROVIDER = { clientId: 'c', clientSecret: 's', authorizeUrl: 'http://127.0.0.1:1/a', tokenUrl: 'http://127.0.0.1:1/t', scope: 'read' }
const bare = (problem: string): string => problem.replace(/ \(line \d+\)$/, '')

function claimHeader (name: string): string[] {
  return configProblems(stringify({
    session: { secret: TEST_SECRET },
    providers: { demo: PROVIDER },
    routes: [{ path: '/app/', upstream: 'http://127.0.0.1:2', provider: 'demo', headers: { [name]: 'claims.roles' } }],
  })).map(bare)
}

function identityHeader (key: 'user' | 'email' | 'groups', name: string): string[] {
  return configProblems(stringify({
    session: { secret: TEST_SECRET },
    routes: [{ path: '/app/', upstream: 'http://127.0.0.1:2', auth: 'none', identityHeaders: { [key]: name } }],
  })).map(bare)
}

const trusted = (at: string, name: string): string =>
  `${at}: must not be ${JSON.stringify(name)}, a header applications trust to say what the request is (the upstream would read the identity as its ${name.toLowerCase()}): name a header of your own, such as X-Forwarded-User`

/** Every name of the class, in the spellings an operator might write. */
const REFUSED = [
  'Content-Type', 'content-type', 'CONTENT-TYPE', 'Content-Encoding', 'Content-Range', 'Content-Disposition', 'Content-Language', 'Content-Location', 'Content-MD5',
  'Origin', 'ORIGIN', 'Referer', 'referer', 'X-Requested-With',
  'X-HTTP-Method-Override', 'x-http-method-override', 'X-Http-Method', 'X-Method-Override', 'X-METHOD-OVERRIDE',
  'Sec-Fetch-Site', 'Sec-Fetch-Mode', 'sec-websocket-key', 'Sec-CH-UA',
]

describe('claim and identity header names an application trusts to describe the request', () => {
  it.each(REFUSED)('refuses the claim header %s, naming its key', (name) => {
    expect(claimHeader(name)).toEqual([trusted(`routes[0].headers.${name}`, name)])
  })

  it.each(REFUSED)('refuses the identity header %s, naming its key', (name) => {
    expect(identityHeader('groups', name)).toEqual([trusted('routes[0].identityHeaders.groups', name)])
  })

  it('refuses the assertion header too', () => {
    expect(configProblems(stringify({ assertion: { header: 'Origin' } })).map(bare)).toEqual([trusted('assertion.header', 'Origin')])
  })

  it.each([['X_HTTP_Method_Override'], ['Content_Type'], ['Sec_Fetch_Site']])('refuses the `_` spelling %s (CGI reads it as the `-` one)', (name) => {
    expect(claimHeader(name)).toEqual([
      `routes[0].headers.${name}: must be a header name of letters, digits and "-" only (CGI, WSGI and PHP read "_" and "." as "-", so a client could send the same header in another spelling), got ${JSON.stringify(name)}`,
    ])
  })

  it.each([['X-Roles'], ['X-Content-Owner'], ['Contents'], ['X-Origin-Team'], ['Originator'], ['Secret-Team'], ['Second-Roles'], ['X-Method']])('accepts %s', (name) => {
    expect(claimHeader(name)).toEqual([])
  })
})
