// What an upstream may not set: the gateway's own cookies, however a Set-Cookie line spells them.
// Two parts must agree: the name proxy/headers.ts reads from an upstream's Set-Cookie (to drop the
// gateway's), and the cookie a browser then sends back, as the gateway reads its Cookie header
// (session/cookie.ts). A browser stores a line by RFC 6265bis 5.7: the pair before the first `;`,
// split at its first `=`; a nameless cookie (no name, or no `=`) goes back as its value alone.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { allCookieNames } from '../../src/oauth/urls.js'
import { clientBoundHeaders } from '../../src/proxy/headers.js'
import { cookieValue } from '../../src/session/cookie.js'

const GATEWAY = allCookieNames({ session: { cookieName: 'gw_session' } } as Parameters<typeof allCookieNames>[0])
const PLANTABLE = GATEWAY.map((name) => name.toLowerCase())

/** The Cookie header a browser sends after storing `line`, or undefined when it stores nothing. */
function sentBack (line: string): string | undefined {
  const semicolon = line.indexOf(';')
  const pair = semicolon === -1 ? line : line.slice(0, semicolon)
  const equals = pair.indexOf('=')
  const name = equals === -1 ? '' : pair.slice(0, equals).trim()
  const value = (equals === -1 ? pair : pair.slice(equals + 1)).trim()
  if (name === '' && value === '') return undefined
  return name === '' ? value : `${name}=${value}`
}

function kept (line: string): boolean {
  const out = clientBoundHeaders({ 'set-cookie': [line, 'app=1'] }, PLANTABLE, '/app/')['set-cookie'] as string[]
  return out.includes(line)
}

const fragment = fc.constantFrom(...GATEWAY, 'GW_Session', 'Gw_Session_As.Sig', '=', ';', ' ', '\t', 'x', 'Path=/', 'Path=/app/', '"', 'app', '.sig')

describe('Set-Cookie from an upstream, as a browser stores it', () => {
  it.each([
    ['gw_session=x; Path=/'], ['GW_SESSION=x'], [' gw_session =x'], ['=gw_session=x; Path=/app/'], ['=gw_session_as.sig=x'],
    ['gw_session; Path=/'], ['gw_session ; Path=/'], ['= gw_session=x'], ['gw_session_flow'],
  ])('drops %j', (line) => {
    expect(kept(line)).toBe(false)
  })

  it('keeps the application\'s own, named or nameless', () => {
    expect(kept('app=1; Path=/')).toBe(true)
    expect(kept('=app=1')).toBe(true)
    expect(kept('theme; Path=/')).toBe(true)
  })

  it('never keeps a line that comes back as one of the gateway\'s cookies', () => {
    fc.assert(fc.property(fc.array(fragment, { minLength: 1, maxLength: 8 }), (parts) => {
      const line = parts.join('')
      if (!kept(line)) return
      const header = sentBack(line)
      for (const name of GATEWAY) expect(cookieValue(header, name), `${JSON.stringify(line)} kept, sent back as ${JSON.stringify(header)}`).toBeUndefined()
    }), { numRuns: 3000 })
  })
})

// Tester's finding (round 4): routes share the gateway's origin, so an upstream's
// Service-Worker-Allowed and Clear-Site-Data reached past its route (a worker of /app/ serving
// every page of the origin; the gateway's session cookie deleted). The browser side:
// test/security/upstream-origin-browser.test.ts.
describe('headers of an upstream\'s answer that could reach past its route (/app/)', () => {
  const passed = (headers: Record<string, string | string[]>) => clientBoundHeaders(headers, PLANTABLE, '/app/')

  it.each<[string | string[], boolean]>([
    ['/app/', true],
    ['/app/static/', true],
    [' /app/ ', true],
    ['/', false],
    ['/ap', false],
    ['/app', false],
    ['/APP/', false],
    ['/app/../', false],
    ['/app/%2e%2e/', false],
    ['/app/..%2f', true],
    ['//evil.example/app/', false],
    ['/\\evil.example/app/', false],
    ['app/', false],
    ['./', false],
    ['http://127.0.0.1/app/', false],
    ['', false],
    [['/app/', '/'], false],
  ])('Service-Worker-Allowed %j: passed on %s', (value, kept) => {
    expect(passed({ 'service-worker-allowed': value })['service-worker-allowed']).toEqual(kept ? value : undefined)
  })

  it.each<[string | string[], string | undefined]>([
    ['"cookies"', undefined],
    ['"COOKIES"', undefined],
    ['"cache", "cookies"', '"cache"'],
    ['"storage"', '"storage"'],
    ['"*"', '"cache", "storage", "executionContexts"'],
    ['"cache", "*"', '"cache", "storage", "executionContexts"'],
    [['"cookies"', '"cache"'], '"cache"'],
    [' , "cookies" ,', undefined],
  ])('Clear-Site-Data %j: passed on as %j', (value, kept) => {
    expect(passed({ 'clear-site-data': value })['clear-site-data']).toEqual(kept)
  })

  it('passes an answer without them as it came (no copy)', () => {
    const headers = { 'content-type': 'text/html', 'cache-control': 'no-store' }
    expect(passed(headers)).toBe(headers)
  })
})
