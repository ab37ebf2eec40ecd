// Open redirects through `next` (docs/security.md, where a browser may be sent): a corpus of hostile
// values, each sent through a real sign-in (real oidc-provider, ending at the callback's 302) and a
// real sign-out (POST /oauth/logout/?next=...). Every Location must stay on the gateway's origin or
// go to a host in forwardAuth.allowedRedirectHosts; hostile values must come back as /oauth/, good
// ones unchanged. Sign-ins run a few at a time, each lane with its own browser that keeps its
// provider cookies between sign-ins.
import { describe, expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { reachCallback } from '../helpers/callback.js'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

const FALLBACK = '/oauth/'

/** Values that must fall back to /oauth/ (the name says which trick each one is). */
const HOSTILE: Array<[name: string, next: string]> = [
  ['protocol-relative', '//evil.example'],
  ['protocol-relative with path', '//evil.example/path'],
  ['three slashes', '///evil.example'],
  ['four slashes', '////evil.example'],
  ['slash backslash', '/\\evil.example'],
  ['backslash slash', '\\/evil.example'],
  ['two backslashes', '\\\\evil.example'],
  ['slash backslash slash', '/\\/evil.example'],
  ['backslash later in the path', '/app\\..\\..\\evil.example'],
  ['encoded slash %2f', '/%2fevil.example'],
  ['encoded slash %2F', '/%2Fevil.example'],
  ['two encoded slashes', '/%2f%2fevil.example'],
  ['encoded slashes mixed case', '/%2F%2fevil.example'],
  ['encoded backslash %5c', '/%5cevil.example'],
  ['encoded backslash %5C', '/%5Cevil.example'],
  ['two encoded backslashes', '/%5c%5cevil.example'],
  ['encoded slashes deeper in the path', '/app/%2f%2fevil.example'],
  ['encoded slash and dots', '/app%2F..%2F..%2Fadmin'],
  ['encoded dots and slashes', '/%2e%2e%2f%2e%2e%2fevil.example'],
  ['no leading slash, encoded slashes', '%2f%2fevil.example'],
  ['dot before //', '/.//evil.example'],
  ['dot-dot before //', '/..//evil.example'],
  ['dot segment', '/./evil.example'],
  ['dot-dot segment', '/../evil.example'],
  ['climbing then //', '/app/../..//evil.example'],
  ['climbing out of the root', '/app/../../../../etc/passwd'],
  ['encoded dot %2e', '/%2e/evil.example'],
  ['encoded dot-dot %2E%2E before //', '/%2E%2E//evil.example'],
  ['half-encoded dot-dot', '/.%2e//evil.example'],
  ['half-encoded dot-dot, other half', '/app/%2E./x'],
  ['trailing dot', '/app/.'],
  ['trailing dot-dot', '/app/..'],
  ['lone dot', '/.'],
  ['lone dot-dot', '/..'],
  ['dot-dot with a segment parameter', '/app/..;/admin'],
  ['tab inside //', '/\t/evil.example'],
  ['newline inside //', '/\n/evil.example'],
  ['carriage return inside //', '/\r/evil.example'],
  ['CRLF inside //', '/\r\n/evil.example'],
  ['tab after //', '//\tevil.example'],
  ['encoded tab inside //', '/%09/evil.example'],
  ['encoded newline inside //', '/%0a/evil.example'],
  ['CRLF header injection', '/app/\r\nSet-Cookie: gw_session=x'],
  ['encoded CRLF header injection', '/app/%0d%0aSet-Cookie:%20gw_session=x'],
  ['NUL', '/app/\u0000'],
  ['NUL before //', '\u0000//evil.example'],
  ['DEL', '/app/\u007f'],
  ['encoded NUL', '/app/%00'],
  ['space inside the path', '/app/ x'],
  ['leading space', ' /app/'],
  ['leading spaces before //', '  //evil.example'],
  ['userinfo after //', '//user@evil.example'],
  ['userinfo and port after //', '//evil.example:443@gateway.invalid'],
  ['https URL', 'https://evil.example'],
  ['http URL', 'http://evil.example'],
  ['scheme without slashes', 'https:evil.example'],
  ['scheme with one slash', 'http:/evil.example'],
  ['scheme with backslashes', 'https:\\\\evil.example'],
  ['javascript:', 'javascript:alert(1)'],
  ['JavaScript: mixed case', 'JaVaScRiPt:alert(1)'],
  ['javascript: after a newline', '\njavascript:alert(1)'],
  ['data:', 'data:text/html,<script>alert(1)</script>'],
  ['bare host', 'evil.example'],
  ['empty', ''],
  ['U+2215 division slash twice', '/\u2215\u2215evil.example'],
  ['U+FF0F fullwidth solidus twice', '/\uFF0F\uFF0Fevil.example'],
  ['U+FF3C fullwidth reverse solidus', '/\uFF3Cevil.example'],
  ['U+3002 ideographic full stop in the host', '//evil\u3002example'],
  ['U+FF0E fullwidth full stops as dot-dot', '/\uFF0E\uFF0E/evil.example'],
  ['non-ASCII letter', '/app/\u00e9'],
  ['percent-encoded U+FF0F (NFKC: //)', '/%EF%BC%8F%EF%BC%8Fevil.example'],
  ['percent-encoded U+FF0E (NFKC: ..)', '/%EF%BC%8E%EF%BC%8E/admin'],
  ['percent-encoded U+FF3C (NFKC: \\)', '/%EF%BC%BCevil.example'],
  ['overlong UTF-8 slash %c0%af', '/%c0%af%c0%afevil.example'],
  ['invalid percent-encoding', '/app/%zz'],
  ['2049 characters', `/${'a'.repeat(2048)}`],
  ['very long //', `//${'a'.repeat(5000)}.evil.example`],
]

/**
 * The gateway's forwardAuth.allowedRedirectHosts in this file: a domain with its subdomains, one
 * host, one host:port, one host with https's own port spelled out, one with a zero-padded port.
 */
const ALLOWED_REDIRECT_HOSTS = ['.example.com', 'app.example.org', 'ports.example.net:8443', 'secure.example.net:443', 'padded.example.net:08443']

/** Absolute URLs aimed at (or dressed up as) an allowed host that must still fall back to /oauth/. */
const ABSOLUTE_HOSTILE: Array<[name: string, next: string]> = [
  ['allowed domain as a prefix of another host', 'https://evil.example.com.attacker.net/'],
  ['allowed domain without its dot boundary', 'https://attackerexample.com/'],
  ['allowed domain under a longer suffix', 'https://example.com.au/'],
  ['allowed host as userinfo', 'https://example.com@evil.net/'],
  ['allowed host as userinfo, no path', 'https://example.com@evil.net'],
  ['allowed host as user:password', 'https://app.example.org:443@evil.net/'],
  ['userinfo on an allowed host', 'https://user@app.example.org/'],
  ['user and password on an allowed host', 'https://user:pass@app.example.com/'],
  ['encoded @ in the host', 'https://example.com%40evil.net/'],
  ['backslash then @ before an allowed host', 'https://evil.net\\@app.example.org/'],
  ['backslash after an allowed host', 'https://app.example.org\\.evil.net/'],
  ['backslashes for the scheme slashes', 'https:\\\\app.example.org/'],
  ['a port on a host listed without one', 'https://app.example.org:8443/'],
  ['the default port spelled out', 'https://app.example.org:443/'],
  ['another port on a host listed with one', 'https://ports.example.net:8444/'],
  ['a host listed with a port, without it', 'https://ports.example.net/'],
  ['a subdomain of a host listed without a dot', 'https://x.app.example.org/'],
  ['the parent of a host listed without a dot', 'https://example.org/'],
  ['IDN look-alike in Unicode (Cyrillic a)', 'https://\u0430pp.example.org/'],
  ['IDN look-alike in punycode', 'https://xn--pp-6kc.example.org/'],
  ['fullwidth letters that fold to an allowed host', 'https://\uFF41pp.example.org/'],
  ['fullwidth full stop in the host', 'https://evil\uFF0Eexample.com/'],
  ['ideographic full stop in the host', 'https://app\u3002example.org/'],
  ['trailing dot on an allowed host', 'https://app.example.org./'],
  ['upper-case host (the parser would change it)', 'https://APP.example.org/'],
  ['upper-case scheme (the parser would change it)', 'HTTPS://app.example.org/'],
  ['dot segments in the path', 'https://app.example.org/a/../b'],
  ['encoded dot segments in the path', 'https://app.example.org/%2e%2e/admin'],
  ['encoded slashes in the path', 'https://app.example.org/%2f%2fevil.net'],
  ['encoded CRLF in the path', 'https://app.example.org/%0d%0aSet-Cookie:%20x=1'],
  ['tab inside an allowed host', 'https://app.example.org\t.evil.net/'],
  ['newline inside the scheme', 'ht\ntps://app.example.org/'],
  ['space before the URL', ' https://app.example.org/'],
  ['encoded NUL in the host', 'https://app.example.org%00.evil.net/'],
  ['scheme with one slash', 'https:/app.example.org/'],
  ['scheme without slashes', 'https:app.example.org/'],
  ['protocol-relative to an allowed host', '//app.example.org/'],
  ['ftp to an allowed host', 'ftp://app.example.org/'],
  ['javascript: with an allowed host', 'javascript://app.example.org/%0aalert(1)'],
  ['allowed host only in the query', 'https://evil.net/?https://app.example.org/'],
  ['allowed host only in the fragment', 'https://evil.net/#app.example.org'],
  ['allowed host only in the path', 'https://evil.net/app.example.org/'],
  ['IPv4 written in hex', 'http://0x7f.1/'],
  ['over 2048 characters', `https://app.example.org/${'a'.repeat(2048)}`],
]

/** Absolute URLs on an allowed host: passed unchanged. */
const ABSOLUTE_KEPT: Array<[name: string, next: string]> = [
  ['allowed: the domain of a leading-dot entry', 'https://example.com/'],
  ['allowed: a subdomain, with query and fragment', 'https://app.example.com/path?q=1#f'],
  ['allowed: a deeper subdomain over http', 'http://a.b.example.com/x'],
  ['allowed: a host listed as is', 'https://app.example.org/dashboard/'],
  ['allowed: a host with its listed port', 'https://ports.example.net:8443/x'],
  ['allowed: an origin without a trailing slash', 'https://app.example.org'],
  // An outside tester's findings: the entry's port was compared as text with the URL's ('' for the default).
  ['allowed: https on a host listed with :443', 'https://secure.example.net/app'],
  ['allowed: the port a zero-padded entry names', 'https://padded.example.net:8443/'],
]

/** Odd but harmless values: same-origin paths that pass unchanged. */
const KEPT: Array<[name: string, next: string]> = [
  ['good: a route', '/app/'],
  ['good: query with an encoded slash', '/app/x?y=1&z=%2F'],
  ['good: fragment', '/app/#frag'],
  ['good: dotted file name', '/app/.well-known/x'],
  ['good: 2048 characters', `/${'a'.repeat(2047)}`],
  ['at-sign after one slash stays a path', '/@evil.example'],
  ['// in the query stays a query', '/app/?next=//evil.example'],
  ['// in the fragment stays a fragment', '/app/#//evil.example'],
  ['percent-encoded U+2215 is an ordinary character', '/%E2%88%95%E2%88%95evil.example'],
  ['percent-encoded U+3002 is an ordinary character', '/%E3%80%82%E3%80%82/x'],
  ['double-encoded slash is an ordinary %25', '/%252f%252fevil.example'],
]

interface Outcome { signIn: { status: number, location: string | null }, signOut: { status: number, location: string | null } }
/** A payload whose sign-in could not even reach the callback (kept so that one payload fails alone). */
interface Broken { error: string }

let gateway: TestGateway
const outcomes = new Map<string, Outcome | Broken>()

/** One payload: sign in with it (stopping at the callback's 302), then sign out with it. */
async function run (browser: Browser, next: string): Promise<Outcome> {
  const callback = await reachCallback(browser, `${gateway.url}/oauth/login/demo/?next=${encodeURIComponent(next)}`)
  const signedIn = await browser.fetch(callback.href)
  await signedIn.arrayBuffer()
  // No Origin or Sec-Fetch-Site header: a request with neither counts as same-origin (docs/security.md, Sign-out).
  const signedOut = await browser.fetch(`${gateway.url}/oauth/logout/?next=${encodeURIComponent(next)}`, { method: 'POST' })
  await signedOut.arrayBuffer()
  return {
    signIn: { status: signedIn.status, location: signedIn.headers.get('location') },
    signOut: { status: signedOut.status, location: signedOut.headers.get('location') },
  }
}

it.beforeAll(async ({ startStack, upstream }) => {
  gateway = await startStack({
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
    forwardAuth: { allowedRedirectHosts: ALLOWED_REDIRECT_HOSTS },
  })
  const queue = [...HOSTILE, ...KEPT, ...ABSOLUTE_HOSTILE, ...ABSOLUTE_KEPT].map(([, next]) => next)
  const lanes = Array.from({ length: 6 }, async () => {
    const browser = new Browser()
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) outcomes.set(next, await run(browser, next).catch((error: unknown) => ({ error: String(error) })))
  })
  await Promise.all(lanes)
})

/** The Location, resolved as a browser would (tabs and newlines dropped, `\` read as `/`), stays on the gateway. */
function expectSameOrigin (location: string | null): void {
  expect(location).not.toBeNull()
  expect(new URL(location!, gateway.url).origin).toBe(new URL(gateway.url).origin)
}

function completed (next: string): Outcome {
  const outcome = outcomes.get(next)
  expect(outcome).toBeDefined()
  expect(outcome).not.toHaveProperty('error')
  return outcome as Outcome
}

describe('open redirects through next', () => {
  it('has a corpus of at least 60 hostile values', () => {
    expect(HOSTILE.length).toBeGreaterThanOrEqual(60)
    expect(new Set([...HOSTILE, ...KEPT].map(([, next]) => next)).size).toBe(HOSTILE.length + KEPT.length)
  })

  it.each(HOSTILE)('sends %s to /oauth/ after sign-in and after sign-out', (_name, next) => {
    const outcome = completed(next)
    expect(outcome.signIn.status).toBe(302)
    expectSameOrigin(outcome.signIn.location)
    expect(outcome.signIn.location).toBe(FALLBACK)
    expect(outcome.signOut.status).toBe(302)
    expectSameOrigin(outcome.signOut.location)
    expect(outcome.signOut.location).toBe(FALLBACK)
  })

  it('has a corpus of at least 40 hostile absolute URLs against allowedRedirectHosts', () => {
    expect(ABSOLUTE_HOSTILE.length).toBeGreaterThanOrEqual(40)
    const all = [...HOSTILE, ...KEPT, ...ABSOLUTE_HOSTILE, ...ABSOLUTE_KEPT].map(([, next]) => next)
    expect(new Set(all).size).toBe(all.length)
  })

  it.each(ABSOLUTE_HOSTILE)('sends %s to /oauth/ after sign-in and after sign-out, though allowedRedirectHosts is set', (_name, next) => {
    const outcome = completed(next)
    expect([outcome.signIn.status, outcome.signIn.location]).toEqual([302, FALLBACK])
    expect([outcome.signOut.status, outcome.signOut.location]).toEqual([302, FALLBACK])
  })

  it.each(ABSOLUTE_KEPT)('sends %s there unchanged after sign-in and after sign-out', (_name, next) => {
    const outcome = completed(next)
    expect([outcome.signIn.status, outcome.signIn.location]).toEqual([302, next])
    expect([outcome.signOut.status, outcome.signOut.location]).toEqual([302, next])
    expect(new URL(next).username + new URL(next).password).toBe('')
  })

  // SPEC, Security floor: absolute URLs to the gateway's own origin (an outside tester's finding: refused).
  it('sends an absolute URL on the gateway\'s own origin there unchanged after sign-in and after sign-out', async () => {
    const next = `${gateway.url}/app/page?x=1`
    const outcome = await run(new Browser(), next)
    expect([outcome.signIn.status, outcome.signIn.location]).toEqual([302, next])
    expect([outcome.signOut.status, outcome.signOut.location]).toEqual([302, next])
  })

  it.each(KEPT)('keeps %s unchanged after sign-in and after sign-out', (_name, next) => {
    const outcome = completed(next)
    expect([outcome.signIn.status, outcome.signIn.location]).toEqual([302, next])
    expectSameOrigin(outcome.signIn.location)
    expect([outcome.signOut.status, outcome.signOut.location]).toEqual([302, next])
    expectSameOrigin(outcome.signOut.location)
  })
})
