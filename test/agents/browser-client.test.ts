// A client that runs in a web page (a browser-based MCP client, on an origin of its own) signs in
// to an agents route in Chromium, as such a client does with fetch: the route's 401 and its
// challenge, the protected resource's and the authorization server's metadata, registration,
// the authorization (the person's sign-in and Allow), the code exchanged at the token endpoint, and
// the route called with its token (its preflight passed to the upstream by `public: OPTIONS`).
// Each step is a cross-origin fetch the browser refuses to show the page without the gateway's
// CORS headers: the 401 and registration had none (agents.md's "not there yet").
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { BrowserContext } from 'playwright-core'
import { afterAll, expect } from 'vitest'
import { sharedChromium } from '../helpers/chromium.js'
import type { TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'
import { test as it } from '../helpers/stack.js'

/** What a page's script does when a step fails (a fetch the browser refused to show it): says so on the page. */
const FAILED = 'addEventListener("error", (event) => { document.body.dataset.error = String(event.message) })'

/** The client's first page: from the route's 401 to the authorization request (its state in sessionStorage). */
const START = `<!doctype html><title>client</title><body><script>${FAILED}</script><script type="module">
const gateway = new URLSearchParams(location.search).get('gateway')
const steps = {}
const first = await fetch(gateway + '/mcp', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
steps.unauthorized = first.status
const challenge = first.headers.get('www-authenticate')
steps.challenge = challenge
const resource = await (await fetch(/resource_metadata="([^"]+)"/.exec(challenge)[1])).json()
const server = await (await fetch(resource.authorization_servers[0] + '/.well-known/oauth-authorization-server')).json()
const registered = await fetch(server.registration_endpoint, { method: 'POST', headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ client_name: 'Page client', redirect_uris: [location.origin + '/callback'], token_endpoint_auth_method: 'none' }) })
steps.registered = registered.status
const { client_id } = await registered.json()
const verifier = crypto.randomUUID() + crypto.randomUUID()
const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))
const challengeCode = btoa(String.fromCharCode(...new Uint8Array(digest))).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '')
sessionStorage.setItem('client', JSON.stringify({ gateway, client_id, verifier, token: server.token_endpoint, resource: resource.resource, steps }))
location.href = server.authorization_endpoint + '?' + new URLSearchParams({ response_type: 'code', client_id, redirect_uri: location.origin + '/callback',
  code_challenge: challengeCode, code_challenge_method: 'S256', resource: resource.resource })
</script>`

/** Where the authorization comes back: the code exchanged, then the route called with the token. */
const CALLBACK = `<!doctype html><title>callback</title><body><script>${FAILED}</script><script type="module">
const { gateway, client_id, verifier, token, resource, steps } = JSON.parse(sessionStorage.getItem('client'))
const code = new URLSearchParams(location.search).get('code')
const tokens = await fetch(token, { method: 'POST', body: new URLSearchParams({ grant_type: 'authorization_code', code, client_id,
  redirect_uri: location.origin + '/callback', code_verifier: verifier, resource }) })
steps.token = tokens.status
const { access_token } = await tokens.json()
const call = await fetch(gateway + '/mcp', { method: 'POST', headers: { authorization: 'Bearer ' + access_token, 'content-type': 'application/json' }, body: '{}' })
steps.call = call.status
steps.answer = await call.json()
document.body.dataset.steps = JSON.stringify(steps)
</script>`

/** The MCP server behind the route, with CORS of its own as the SDK's examples have: preflights and answers. */
function mcpServer (request: IncomingMessage, response: ServerResponse): void {
  const cors = { 'access-control-allow-origin': '*', 'access-control-allow-headers': 'authorization, content-type', 'access-control-allow-methods': 'POST' }
  if (request.method === 'OPTIONS') response.writeHead(204, cors).end()
  else response.writeHead(200, { ...cors, 'content-type': 'application/json' }).end(JSON.stringify({ reached: true, user: request.headers['x-forwarded-user'] }))
}

const upstream = createServer(mcpServer)
const client = createServer((request, response) => {
  const page = request.url?.startsWith('/callback') === true ? CALLBACK : request.url?.startsWith('/start') === true ? START : undefined
  if (page === undefined) response.writeHead(404).end()
  else response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(page)
})
let gateway: TestGateway
let clientUrl: string
let context: BrowserContext | undefined

it.beforeAll(async ({ startStack }) => {
  clientUrl = await listen(client)
  gateway = await startStack({
    routes: [{ path: '/mcp', upstream: await listen(upstream), provider: 'demo', agents: true, public: ['OPTIONS /mcp'] }],
  })
})

afterAll(async () => {
  await context?.close()
  await gateway?.close()
  await Promise.all([close(client), close(upstream)])
})

it('a client in a web page finds the authorization server, registers, is allowed and calls the route', async () => {
  context = await (await sharedChromium()).newContext()
  const page = await context.newPage()
  await page.goto(`${clientUrl}/start?gateway=${encodeURIComponent(gateway.url)}`)
  await page.waitForSelector('input[name="login"], body[data-error]', { state: 'attached' })
  expect(await page.getAttribute('body', 'data-error')).toBeNull()
  await page.fill('input[name="login"]', 'alice')
  await page.click('button:has-text("Sign in")')
  await page.click('button:has-text("Allow")')
  await page.waitForSelector('h1:has-text("Allow an agent?")')
  expect(await page.textContent('body')).toContain('Page client')
  await page.click('button:has-text("Allow")')
  await page.waitForSelector('body[data-steps], body[data-error]', { state: 'attached' })
  expect(await page.getAttribute('body', 'data-error')).toBeNull()
  const steps = JSON.parse(await page.getAttribute('body', 'data-steps') ?? '{}') as Record<string, unknown>
  expect(steps).toEqual({
    unauthorized: 401,
    challenge: expect.stringContaining(`resource_metadata="${gateway.url}/.well-known/oauth-protected-resource/mcp"`) as unknown,
    registered: 201,
    token: 200,
    call: 200,
    answer: { reached: true, user: 'alice' },
  })
})

// What a stranger sends a preflight: the headers it asks for are answered as sent (the browser
// compares them itself), nothing else of the request reaches the answer, and an OPTIONS that is no
// preflight goes on to oidc-provider (no 204, nothing allowed).
it.each([
  ['no headers asked', undefined],
  ['a list with odd spacing', 'content-type ,  x-a,x-b'],
  ['a header named like an allow header', 'access-control-allow-credentials'],
  ['8 KB of names', Array.from({ length: 800 }, (_, i) => `x-h${i}`).join(',').slice(0, 8192)],
  ['a quote and a semicolon', 'x-"a";b'],
])('a registration preflight asking %s', async (_name, asked) => {
  const response = await fetch(`${gateway.url}/oauth/agents/register`, {
    method: 'OPTIONS', headers: { origin: 'https://evil.example', 'access-control-request-method': 'DELETE', ...(asked === undefined ? {} : { 'access-control-request-headers': asked }) },
  })
  expect(response.status).toBe(204)
  expect(response.headers.get('access-control-allow-headers')).toBe(asked ?? null)
  expect(response.headers.get('access-control-allow-methods')).toBe('POST')
  expect(response.headers.get('access-control-allow-origin')).toBe('*')
  expect(response.headers.get('access-control-allow-credentials')).toBeNull()
})

it('an OPTIONS to registration that is no preflight is not answered as one', async () => {
  const response = await fetch(`${gateway.url}/oauth/agents/register`, { method: 'OPTIONS', headers: { origin: 'https://evil.example' } })
  expect(response.status).not.toBe(204)
  expect(response.headers.get('access-control-allow-methods')).toBeNull()
})

it('answers a registration\'s preflight, and any page may read the route\'s 401, never with credentials', async () => {
  const preflight = await fetch(`${gateway.url}/oauth/agents/register`, { method: 'OPTIONS', headers: { origin: 'https://page.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' } })
  expect(preflight.status).toBe(204)
  expect(Object.fromEntries([...preflight.headers].filter(([name]) => name.startsWith('access-control-')))).toEqual({
    'access-control-allow-origin': '*', 'access-control-allow-methods': 'POST', 'access-control-allow-headers': 'content-type', 'access-control-max-age': '600',
  })
  const refused = await fetch(`${gateway.url}/mcp`, { headers: { origin: 'https://page.example', accept: 'application/json' } })
  expect(refused.status).toBe(401)
  expect(refused.headers.get('access-control-allow-origin')).toBe('*')
  expect(refused.headers.get('access-control-allow-credentials')).toBeNull()
  expect(refused.headers.get('access-control-expose-headers')).toBe('WWW-Authenticate')
})
