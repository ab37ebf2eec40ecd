// Clients named by the https URL of their metadata document (OAuth Client ID Metadata Documents, as
// MCP clients use), over real sockets: the gateway, its Redis, the worker's oidc-provider as the
// route's provider, and an https server on 127.0.0.1 holding the documents (listed in
// clientMetadataPrivateHosts; its certificate trusted through the gateway's extraCa). A good
// document signs a client in and is fetched once; documents that lie, are too large, redirect,
// never answer, break the gateway's client rules, or sit at a private address nobody listed, end
// on an error page, never at a redirect to the client.
import { createHash, randomBytes } from 'node:crypto'
import { createServer, type Server } from 'node:https'
import type { AddressInfo } from 'node:net'
import { afterAll, describe, expect } from 'vitest'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'
import { Browser } from '../helpers/browser.js'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import { TEST_CERT, TEST_KEY } from '../helpers/tls-cert.js'
import { specialUse } from '../../src/agents/document-fetch.js'

const REDIRECT = 'http://127.0.0.1:8977/callback'
/** oidc-provider's own bound on one fetch of a document. */
const FETCH_TIMEOUT_MS = 2500

let gateway: TestGateway
let base = ''
const fetched = new Map<string, number>()

/** What each document path answers; `client_id` is filled in with the document's own URL unless given. */
const documents: Record<string, (url: string) => { status?: number, headers?: Record<string, string>, body?: unknown, hang?: true, trickle?: true, chunked?: true }> = {
  '/good.json': (url) => ({ headers: { 'cache-control': 'max-age=600' }, body: { client_id: url, client_name: 'Doc client', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' } }),
  // Its client_id spells the scheme in capitals, as it is asked for: oidc-provider takes `HTTPS://` too.
  '/upper.json': (url) => ({ body: { client_id: url.replace('https://', 'HTTPS://'), client_name: 'Doc client', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' } }),
  '/another-id.json': () => ({ body: { client_id: `${base}/good.json`, client_name: 'Liar', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' } }),
  '/big.json': (url) => ({ body: { client_id: url, client_name: 'Big', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none', padding: 'x'.repeat(6000) } }),
  // The same without a Content-Length: oidc-provider finds it too large only while reading it.
  '/big-chunked.json': (url) => ({ chunked: true, body: { client_id: url, client_name: 'Big', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none', padding: 'x'.repeat(6000) } }),
  '/redirect.json': () => ({ status: 302, headers: { location: `${base}/good.json` } }),
  '/script.json': (url) => ({ body: { client_id: url, client_name: 'Script', redirect_uris: ['javascript:alert(1)'], token_endpoint_auth_method: 'none' } }),
  // What only the gateway's own client rules refuse (src/agents/clients.ts): the name the consent page shows whole.
  '/long-name.json': (url) => ({ body: { client_id: url, client_name: 'x'.repeat(101), redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' } }),
  '/hidden-name.json': (url) => ({ body: { client_id: url, client_name: 'Doc\u202E client', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'none' } }),
  '/secret.json': (url) => ({ body: { client_id: url, client_name: 'Secret', redirect_uris: [REDIRECT], token_endpoint_auth_method: 'client_secret_post' } }),
  '/not-json.json': () => ({ body: '<html>not a document</html>' }),
  '/hang.json': () => ({ hang: true }),
  // Its headers and a first byte at once, then a space every 200 ms, never ending.
  '/trickle.json': () => ({ trickle: true }),
}

const server: Server = createServer({ key: TEST_KEY, cert: TEST_CERT }, (request, response) => {
  const path = new URL(request.url ?? '/', base).pathname
  fetched.set(path, (fetched.get(path) ?? 0) + 1)
  const answer = documents[path]?.(`https://${request.headers.host ?? ''}${path}`)
  if (answer === undefined) {
    response.writeHead(404).end()
  } else if (answer.trickle === true) {
    response.writeHead(200, { 'content-type': 'application/json' }).write('{')
    const dribble = setInterval(() => response.write(' '), 200)
    response.on('close', () => clearInterval(dribble))
  } else if (answer.chunked === true) {
    const text = JSON.stringify(answer.body)
    response.writeHead(200, { 'content-type': 'application/json' }).write(text.slice(0, 4000))
    response.end(text.slice(4000))
  } else if (answer.hang !== true) {
    response.writeHead(answer.status ?? 200, { 'content-type': 'application/json', ...answer.headers })
    response.end(typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body ?? {}))
  }
})
/** TCP connections the document server accepted. */
let connected = 0
server.on('connection', () => { connected++ })

it.beforeAll(async ({ startStack, upstream }) => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `https://127.0.0.1:${(server.address() as AddressInfo).port}`
  gateway = await startStack({
    agents: { clientMetadataDocuments: true, clientMetadataPrivateHosts: ['127.0.0.1'] },
    routes: [{ path: '/mcp', upstream: upstream.url, provider: 'demo', agents: true }],
  }, { deps: { extraCa: TEST_CERT } })
})

afterAll(async () => {
  await gateway?.close()
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
})

/** An authorization request of the client `clientId`, with its PKCE verifier. */
function authorization (clientId: string): { url: string, verifier: string } {
  const verifier = randomBytes(32).toString('base64url')
  const query = new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: REDIRECT, code_challenge: createHash('sha256').update(verifier).digest('base64url'), code_challenge_method: 'S256' })
  return { url: `${gateway.url}/oauth/agents/authorize?${query.toString()}`, verifier }
}

describe('client ID metadata documents', () => {
  it('are announced in the metadata', async () => {
    const metadata = await (await fetch(`${gateway.url}/.well-known/oauth-authorization-server`)).json() as Record<string, unknown>
    expect(metadata.client_id_metadata_document_supported).toBe(true)
  })

  it('sign in a client named by its document: the consent page names the document\'s host, the code is exchanged, and the document is fetched once', async () => {
    const clientId = `${base}/good.json`
    const { url, verifier } = authorization(clientId)
    const browser = new Browser()
    const page = await browser.navigate(url, { login: 'alice' })
    const consent = await page.text()
    expect(page.status, consent).toBe(200)
    expect(consent).toContain('Doc client')
    expect(consent).toContain(`<strong><bdi>Doc client</bdi></strong>, as described at <code>${new URL(base).host}</code>, asks to use`)
    expect(consent).toContain(`<dt>Named by</dt><dd><code>${new URL(base).host}</code>, where its description is</dd>`)
    const csrf = /name="csrf" value="([^"]+)"/.exec(consent)![1]!
    const action = new URL(/<form method="post" action="([^"]+)"/.exec(consent)![1]!, gateway.url).href
    let response = await browser.fetch(action, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gateway.url }, body: new URLSearchParams({ csrf, decision: 'allow' }) })
    while (!(response.headers.get('location') ?? '').startsWith(REDIRECT)) response = await browser.fetch(new URL(response.headers.get('location')!, action).href)
    const code = new URL(response.headers.get('location')!).searchParams.get('code')!
    const tokens = await fetch(`${gateway.url}/oauth/agents/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'authorization_code', code, client_id: clientId, redirect_uri: REDIRECT, code_verifier: verifier }) })
    const body = await tokens.json() as { access_token: string }
    expect(tokens.status, JSON.stringify(body)).toBe(200)
    expect((await fetch(`${gateway.url}/mcp`, { headers: { authorization: `Bearer ${body.access_token}` } })).status).toBe(200)
    // Kept for its max-age (within 1 min to 1 day): the authorization, consent and token requests fetched it once.
    expect(fetched.get('/good.json')).toBe(1)
  })

  // An outside tester's finding: oidc-provider takes an https client_id in any case of its scheme,
  // and the page named the document's host only for a lower-case `https://`: the client was shown
  // as one that named itself, the host to judge it by nowhere (with `registration: off` too).
  it('whose client_id spells https in capitals: the consent page still names the document\'s host', async () => {
    const page = await new Browser().navigate(authorization(`HTTPS://${new URL(base).host}/upper.json`).url, { login: 'alice' })
    const consent = await page.text()
    expect(page.status, consent).toBe(200)
    expect(consent).toContain(`<strong><bdi>Doc client</bdi></strong>, as described at <code>${new URL(base).host}</code>, asks to use`)
    expect(consent).not.toContain('calls itself')
  })

  it.each([
    ['names another client_id', '/another-id.json'],
    ['is larger than 5 KiB', '/big.json'],
    ['is larger than 5 KiB, sent without a Content-Length', '/big-chunked.json'],
    ['redirects', '/redirect.json'],
    ['has a redirect URI the gateway refuses (javascript:)', '/script.json'],
    ['breaks only the gateway\'s own client rules (a name of 101 characters)', '/long-name.json'],
    ['names itself with a direction override', '/hidden-name.json'],
    ['asks for a client secret', '/secret.json'],
    ['is not JSON', '/not-json.json'],
    ['is nowhere (404)', '/missing.json'],
  ])('a document that %s is an error page, never a redirect to the client', async (_name, path) => {
    const response = await new Browser().fetch(authorization(`${base}${path}`).url)
    expect(response.status).toBeGreaterThanOrEqual(400)
    expect(response.headers.get('location')).toBeNull()
    expect(await response.text()).toContain('This authorization cannot go on')
  })

  // A reviewer's row: the chunked one's cancel (oidc-provider stops reading it at its cap) was
  // taken for a failed fetch, and the next try was refused at once instead of fetched again.
  it.each([['/big.json'], ['/big-chunked.json']])('a document that arrived but was refused (%s, too large) is fetched again on the next try', async (path) => {
    expect((await new Browser().fetch(authorization(`${base}${path}`).url)).status).toBeGreaterThanOrEqual(400)
    const before = fetched.get(path) ?? 0
    expect((await new Browser().fetch(authorization(`${base}${path}`).url)).status).toBeGreaterThanOrEqual(400)
    expect(fetched.get(path)).toBeGreaterThan(before)
  })

  // The trickle is an outside tester's row: its body's timeout went unremembered, and one request
  // fetched it twice, for twice the timeout, and every later one again.
  it.each([
    ['never answers', '/hang.json'],
    ['sends its headers, then its body a byte at a time, never ending', '/trickle.json'],
  ])('a document that %s is an error page within oidc-provider\'s fetch timeout, fetched once, then fails at once', async (_case, path) => {
    const started = Date.now()
    const response = await new Browser().fetch(authorization(`${base}${path}`).url)
    expect(response.status).toBeGreaterThanOrEqual(400)
    expect(Date.now() - started).toBeLessThan(FETCH_TIMEOUT_MS + ONE_ANSWER_MS)
    expect(fetched.get(path)).toBe(1)
    // Failed moments ago: refused at once, not fetched again.
    const again = Date.now()
    expect((await new Browser().fetch(authorization(`${base}${path}`).url)).status).toBeGreaterThanOrEqual(400)
    expect(Date.now() - again).toBeLessThan(FETCH_TIMEOUT_MS)
    expect(fetched.get(path)).toBe(1)
  })

  // An outside tester's finding: oidc-provider's pool judged the address of a socket already
  // connected, so each of these opened a TCP connection and a TLS handshake to the internal port (a
  // blind port scan for a stranger); now none is connected to.
  it('a document at a loopback or private address whose host is not listed is never fetched, nor connected to', async () => {
    // The same server, named by other spellings of its address and by a name that resolves to it, none
    // of them what clientMetadataPrivateHosts lists (127.0.0.1, which `2130706433` or `127.1` also name in a URL).
    const before = fetched.get('/good.json') ?? 0
    const connections = connected
    const port = new URL(base).port
    for (const host of ['localhost', '127.0.0.1.nip.invalid', '0.0.0.0', '[::1]', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]', '[64:ff9b::7f00:1]']) {
      const response = await new Browser().fetch(authorization(`https://${host}:${port}/good.json`).url)
      expect(response.status, host).toBeGreaterThanOrEqual(400)
      expect(response.headers.get('location')).toBeNull()
    }
    expect(fetched.get('/good.json') ?? 0).toBe(before)
    expect(connected).toBe(connections)
  })

  it('client_id URLs that are not documents\' are unknown clients: http, credentials, fragments, dot segments', async () => {
    const port = new URL(base).port
    for (const clientId of [`http://127.0.0.1:${port}/good.json`, `https://user:pass@127.0.0.1:${port}/good.json`, `${base}/good.json#x`, `${base}/a/../good.json`, `${base}/%2e%2e/good.json`]) {
      const response = await new Browser().fetch(authorization(clientId).url)
      expect(response.status, clientId).toBeGreaterThanOrEqual(400)
      expect(response.headers.get('location')).toBeNull()
    }
  })
})

describe('which addresses a document is never fetched from (unlisted)', () => {
  it.each([
    '127.0.0.1', '127.255.255.254', '0.0.0.0', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '198.18.0.1', '224.0.0.1',
    '255.255.255.255', '::', '[::1]', '::1', 'fe80::1', 'fd00::1', 'fc00::1', '::ffff:10.0.0.1', '[::ffff:7f00:1]', '64:ff9b::a00:1', '2001:db8::1', 'ff02::1',
  ])('%s: special-use', (address) => {
    expect(specialUse(address)).toBe(true)
  })

  it.each(['93.184.216.34', '8.8.8.8', '2606:4700::1', '[2a00:1450::1]', '::ffff:8.8.8.8', 'agent.example.com', ''])('%j: not special-use (a name is judged by what it resolves to)', (address) => {
    expect(specialUse(address)).toBe(false)
  })
})
