// /oauth/ for a signed-in person: the way back to the applications the access gate lets them open
// (judged by access/gate.ts, as the proxy judges a GET of the route's path), the page they came from
// first, "Signed in as <name> with <provider>" instead of a Sign-in button for that provider, and
// every name, claim and path escaped. Hostile `next` values never become the first link.
import { afterAll, describe, expect } from 'vitest'
import { homePage } from '../../src/http/pages.js'
import { Browser } from '../helpers/browser.js'
import { type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

let upstream: Upstream
let gateway: TestGateway
let alice: Browser

it.beforeAll(async ({ startStack }) => {
  upstream = await startUpstream()
  gateway = await startStack({
    store: { type: 'memory' },
    routes: [
      // First of the provider's routes: an MCP server is no page to land on after a sign-in.
      { path: '/mcp', upstream: upstream.url, provider: 'demo', agents: true },
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/admins/', upstream: upstream.url, provider: 'demo', allow: { emails: ['root@example.test'] } },
      { path: '/app/private/', upstream: upstream.url, provider: 'demo', deny: { users: ['alice'] } },
      { path: "/it's/", upstream: upstream.url, provider: 'demo' },
      { path: '/a"b<c>/', upstream: upstream.url, provider: 'demo' },
      { path: '/café/', upstream: upstream.url, provider: 'demo' },
      { path: '/open/', upstream: upstream.url, auth: 'none' },
      { path: '/api/', upstream: upstream.url, provider: 'demo' },
      { path: '/api/tools', upstream: upstream.url, provider: 'demo', agents: true, deny: { users: ['alice'] } },
    ],
  })
  alice = new Browser()
  expect((await alice.navigate(`${gateway.url}/app/`, { login: 'alice' })).status).toBe(200)
})

afterAll(async () => {
  await gateway?.close()
  await upstream?.close()
})

async function home (browser: Browser, query = ''): Promise<string> {
  const response = await browser.fetch(`${gateway.url}/oauth/${query}`, { headers: { accept: 'text/html' } })
  expect(response.status).toBe(200)
  return await response.text()
}

/** The app links of the page, in order. */
function appLinks (page: string): string[] {
  return [...page.matchAll(/<a class="app" href="([^"]*)">/g)].map((match) => match[1]!)
}

describe('/oauth/ signed in: the way back to the applications', () => {
  it('links the routes the rules let this person GET, by path, and no others', async () => {
    const page = await home(alice)
    // /admins/ admits only root, /app/private/ denies alice; /open/ needs no sign-in; a path a
    // browser would send otherwise than written (a quote, `<`, non-ASCII) is not linked.
    expect(appLinks(page)).toEqual(['/app/', '/it&#39;s/', '/api/'])
    expect(page).toContain('<a class="app" href="/it&#39;s/">/it&#39;s/</a>')
    expect(page).not.toContain('<c>')
  })

  it('shows the address of an agents: true route for an MCP client instead of linking it, and only where the rules let the person in', async () => {
    const page = await home(alice)
    expect(appLinks(page)).not.toContain('/mcp/')
    const addresses = [...page.matchAll(/<code class="agent">([^<]*)<\/code>/g)].map((match) => match[1])
    expect(addresses).toEqual([`${gateway.url}/mcp`])
  })

  it('never puts an agents route first, even one inside a route the person may open (judged by the route that serves it)', async () => {
    expect(appLinks(await home(alice, '?next=/api/tools'))[0]).toBe('/app/')
    expect(appLinks(await home(alice, '?next=/mcp'))[0]).toBe('/app/')
  })

  it('says whom the person is signed in as, offers "Use another account", and no Sign-in button for that provider', async () => {
    const page = await home(alice)
    expect(page).toContain('Signed in as <strong><bdi>alice</bdi></strong> with <code>demo</code>')
    expect(page).toContain(`action="${gateway.url}/oauth/logout/?next=%2Foauth%2F&#38;switch=demo"`)
    expect(page).not.toContain('Sign in with demo')
    expect(page).toContain('<form method="post" action="/oauth/logout/">')
  })

  it('puts the page the person came from first, when the gate lets them open it', async () => {
    expect(appLinks(await home(alice, '?next=%2Fapp%2Freports%3Fmonth%3D3'))).toEqual(['/app/reports?month=3', '/app/', '/it&#39;s/', '/api/'])
    expect(appLinks(await home(alice, '?next=%2Fapp%2F'))).toEqual(['/app/', '/it&#39;s/', '/api/'])
  })

  it.each([
    ['a route whose rules refuse the person', '/admins/x'],
    ['a deny rule on a longer prefix inside a route they may open', '/app/private/x'],
    ['a protocol-relative address', '//evil.example/'],
    ['another site', 'https://evil.example/app/'],
    ['a backslash', '/\\evil.example/'],
    ['javascript:', 'javascript:alert(1)'],
    ['a dot segment climbing out of /app/', '/app/../admins/'],
    ['an encoded dot segment', '/app/%2e%2e/admins/'],
    ['markup', '/app/"><script>alert(1)</script>'],
    ['no route serves it', '/nowhere/'],
    ['a public route', '/open/x'],
  ])('does not put %s first', async (_what, next) => {
    const page = await home(alice, `?next=${encodeURIComponent(next)}`)
    expect(appLinks(page)).toEqual(['/app/', '/it&#39;s/', '/api/'])
    expect(page).not.toContain('evil')
    expect(page).not.toContain('<script>')
  })

  it('answers API clients with the userinfo shape, unchanged', async () => {
    const response = await alice.fetch(`${gateway.url}/oauth/`, { headers: { accept: 'application/json' } })
    expect(Object.keys(await response.json() as object)).toEqual(['identities'])
  })

  it('a person not signed in sees no applications and a Sign-in button back to the provider\'s first page, not its MCP server', async () => {
    const page = await home(new Browser())
    expect(appLinks(page)).toEqual([])
    expect(page).toContain(`<a class="button" href="${gateway.url}/oauth/login/demo/?next=%2Fapp%2F">Sign in with demo</a>`)
  })

  it('a person not signed in signs in back to the page named by next, when it is one a sign-in may return to', async () => {
    expect(await home(new Browser(), '?next=%2Foauth%2Fsessions%2F')).toContain(`href="${gateway.url}/oauth/login/demo/?next=%2Foauth%2Fsessions%2F">Sign in with demo`)
    for (const hostile of ['%2F%2Fevil.example%2F', 'https%3A%2F%2Fevil.example%2F', '%2F%5Cevil.example']) {
      expect(await home(new Browser(), `?next=${hostile}`)).toContain(`href="${gateway.url}/oauth/login/demo/?next=%2Fapp%2F">Sign in with demo`)
    }
  })
})

describe('homePage: hostile values are escaped', () => {
  const hostile = {
    sub: '<script>alert(1)</script>',
    name: '"><img src=x onerror=alert(1)>',
    email: "o'neil@example.test\"<b>",
    groups: [],
  }
  const links = [{ name: 'demo', href: 'https://gw.example/oauth/login/demo/?next=%2F' }, { name: 'other', href: 'https://gw.example/oauth/login/other/?next=%2F' }]

  it('names, e-mail addresses, providers and app labels never reach the page unescaped', () => {
    const page = homePage({ demo: hostile }, links, [{ label: '/x"y\'z/', href: '/x"y\'z/' }], (provider) => `https://gw.example/oauth/logout/?switch=${provider}&x="`)
    expect(page).not.toMatch(/<img|<script|<b>|onerror=alert\(1\)>/)
    expect(page).toContain('Signed in as <strong><bdi>&#34;&#62;&#60;img src=x onerror=alert(1)&#62;</bdi></strong>')
    expect(page).toContain('<a class="app" href="/x&#34;y&#39;z/">/x&#34;y&#39;z/</a>')
  })

  it('keeps the Sign-in button of a provider the person is not signed in with', () => {
    const page = homePage({ demo: { sub: 'alice', groups: [] } }, links)
    expect(page).not.toContain('Sign in with demo')
    expect(page).toContain('Sign in with other')
  })
})
