// An MCP client signs in through the gateway, as Claude Code or VS Code would: the MCP TypeScript
// SDK's own client (its OAuth client provider: discovery from the 401, RFC 7591 registration, PKCE,
// the redirect, finishAuth) against the SDK's MCP server behind a route with `agents: true`; the
// person's part (the provider's sign-in, then the gateway's consent page) in Chromium. The upstream
// gets the provider's access token, never the gateway's; a token for this route is refused on
// another; the refresh token rotates and a rotated one used again ends the grant.
import { mkdir } from 'node:fs/promises'
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import type { OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js'
import type { Browser, Page } from 'playwright-core'
import { afterAll, describe, expect } from 'vitest'
import { MemoryProvider } from '../helpers/agent-grant.js'
import { ARTIFACTS, sharedChromium, signInAt } from '../helpers/chromium.js'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

let gateway: TestGateway
let browser: Browser
let mcp: Server
/** The headers of every request the MCP server behind the gateway got. */
const seen: IncomingHttpHeaders[] = []
let callback: { server: Server, url: string, codes: Map<string, string> }

/** An MCP server (the SDK's, stateless streamable HTTP) with one tool. */
async function startMcpServer (): Promise<{ server: Server, url: string }> {
  const server = createServer((request, response) => {
    seen.push(request.headers)
    const mcpServer = new McpServer({ name: 'behind-the-gateway', version: '1.0.0' })
    mcpServer.registerTool('whoami', { description: 'Who the gateway says is calling' }, async () => ({
      content: [{ type: 'text', text: String(request.headers['x-forwarded-user']) }],
    }))
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
    response.on('close', () => { void transport.close(); void mcpServer.close() })
    mcpServer.connect(transport).then(async () => await transport.handleRequest(request, response), (error: unknown) => { response.destroy(error as Error) })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}

/** The client's loopback redirect URI: it answers the browser and keeps the code per `state`-less visit. */
async function startCallback (): Promise<typeof callback> {
  const codes = new Map<string, string>()
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1')
    codes.set('last', url.searchParams.get('code') ?? `error:${url.searchParams.get('error') ?? ''}`)
    response.end('You may close this window.')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`, codes }
}

/** The person's part in Chromium: the provider's sign-in, then the gateway's consent page, Allow or Deny. */
async function consent (page: Page, url: URL, login: string, decision: 'Allow' | 'Deny'): Promise<string> {
  callback.codes.delete('last')
  await page.goto(url.href)
  await page.fill('input[name="login"]', login)
  await page.click('button:has-text("Sign in")')
  await page.click('button:has-text("Allow")')
  await page.waitForURL(/\/oauth\/agents\/interaction\//)
  expect(await page.textContent('h1')).toBe('Allow an agent?')
  expect(await page.textContent('body')).toContain('Test MCP client')
  await page.screenshot({ path: `${ARTIFACTS}/agents-consent.png`, fullPage: true })
  await page.click(`button:has-text("${decision}")`)
  await page.waitForURL(/\/callback\?/)
  return callback.codes.get('last')!
}

it.beforeAll(async ({ startStack, upstream }) => {
  await mkdir(ARTIFACTS, { recursive: true })
  const server = await startMcpServer()
  mcp = server.server
  callback = await startCallback()
  gateway = await startStack({
    routes: [
      { path: '/mcp', upstream: server.url, provider: 'demo', agents: true },
      { path: '/other/', upstream: upstream.url, provider: 'demo', agents: true },
    ],
  })
  browser = await sharedChromium()
})

afterAll(async () => {
  await gateway?.close()
  await new Promise((resolve) => mcp?.close(resolve))
  await new Promise((resolve) => callback?.server.close(resolve))
})

describe('an MCP client signs in through the gateway', () => {
  it('discovers, registers, is allowed on the consent page, and calls a tool as the person; the upstream gets the provider\'s token', async () => {
    const provider = new MemoryProvider(callback.url)
    const url = new URL(`${gateway.url}/mcp`)
    const first = new StreamableHTTPClientTransport(url, { authProvider: provider })
    await expect(new Client({ name: 'test', version: '1.0.0' }).connect(first)).rejects.toThrow(/Unauthorized/)
    expect(provider.client?.client_id).toBeTruthy()
    expect(provider.authorizationUrl?.href).toContain(`${gateway.url}/oauth/agents/authorize?`)

    const context = await browser.newContext()
    const code = await consent(await context.newPage(), provider.authorizationUrl!, 'alice', 'Allow')
    await context.close()
    await first.finishAuth(code)
    expect(provider.saved?.refresh_token).toBeTruthy()

    const client = new Client({ name: 'test', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }))
    const result = await client.callTool({ name: 'whoami', arguments: {} })
    expect(result.content).toEqual([{ type: 'text', text: 'alice' }])
    await client.close()

    // The upstream saw the provider's access token, never the gateway's own.
    const agentToken = provider.saved!.access_token
    expect(seen.length).toBeGreaterThan(0)
    for (const headers of seen) {
      expect(headers.authorization).toMatch(/^Bearer /)
      expect(headers.authorization).not.toContain(agentToken)
    }

    // A token for /mcp is refused on /other/.
    const other = await fetch(`${gateway.url}/other/`, { headers: { authorization: `Bearer ${agentToken}` } })
    expect(other.status).toBe(401)
    expect(other.headers.get('www-authenticate')).toContain('invalid_token')

    // The refresh token rotates; the rotated one, used again, ends the grant.
    const token = `${gateway.url}/oauth/agents/token`
    const refresh = async (refreshToken: string) => await fetch(token, { method: 'POST', body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: provider.client!.client_id }) })
    const rotated = await refresh(provider.saved!.refresh_token!)
    expect(rotated.status).toBe(200)
    const fresh = await rotated.json() as OAuthTokens
    expect(fresh.refresh_token).not.toBe(provider.saved!.refresh_token)
    expect((await fetch(`${gateway.url}/mcp`, { method: 'POST', headers: { authorization: `Bearer ${fresh.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' })).status).toBe(200)
    expect((await refresh(provider.saved!.refresh_token!)).status).toBe(400)
    const ended = await fetch(`${gateway.url}/mcp`, { method: 'POST', headers: { authorization: `Bearer ${fresh.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' })
    expect(ended.status).toBe(401)
  })

  it('the grant is listed on the person\'s sessions page, and Revoke there ends the agent\'s access', async () => {
    const provider = new MemoryProvider(callback.url)
    const url = new URL(`${gateway.url}/mcp`)
    const transport = new StreamableHTTPClientTransport(url, { authProvider: provider })
    await expect(new Client({ name: 'test', version: '1.0.0' }).connect(transport)).rejects.toThrow(/Unauthorized/)
    const agentContext = await browser.newContext()
    await transport.finishAuth(await consent(await agentContext.newPage(), provider.authorizationUrl!, 'dave', 'Allow'))
    await agentContext.close()
    const ping = async () => await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${provider.saved!.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' })
    expect((await ping()).status).toBe(200)

    // The same person, signed in in a browser, sees the agent's grant beside that browser.
    const context = await browser.newContext()
    const page = await context.newPage()
    await signInAt(page, `${gateway.url}/other/`, 'dave')
    await page.goto(`${gateway.url}/oauth/sessions/`)
    const agentRow = page.locator('table.sessions tbody tr', { hasText: 'agent (MCP client or CLI)' })
    expect(await agentRow.count()).toBe(1)
    // Which client, on which route.
    expect(await agentRow.locator('td').first().textContent()).toBe('agent (MCP client or CLI): Test MCP client on /mcp')
    // The JSON form with the browser's cookies (the page itself may fetch nothing: its Content-Security-Policy).
    const listed = await (await context.request.get(`${gateway.url}/oauth/sessions/`, { headers: { accept: 'application/json' } })).json() as { sessions: Array<{ agent?: unknown }> }
    expect(listed.sessions.map((session) => session.agent).filter(Boolean)).toEqual([{ client: 'Test MCP client', route: '/mcp' }])
    await page.screenshot({ path: `${ARTIFACTS}/agent-on-sessions-page.png`, fullPage: true })
    // Revoke asks first, naming the grant; its button ends it.
    await agentRow.locator('a:has-text("Revoke")').click()
    await page.waitForURL(/\/revoke$/)
    expect(await page.locator('dl.seen dd').first().textContent()).toBe('agent (MCP client or CLI): Test MCP client on /mcp')
    // Worded as an agent's access, not a browser's session (a newcomer's reading).
    expect([await page.locator('h1').textContent(), await page.locator('dl.seen dt').first().textContent()]).toEqual(['Revoke this agent\'s access?', 'Agent'])
    await page.click('button:has-text("Revoke access")')
    await page.waitForURL(`${gateway.url}/oauth/sessions/?revoked=agent`)
    expect(await page.locator('p.notice').textContent()).toBe('The agent\'s access was revoked: its tokens no longer work.')
    expect(await page.locator('table.sessions tbody tr', { hasText: 'agent (MCP client or CLI)' }).count()).toBe(0)
    await context.close()
    expect((await ping()).status).toBe(401)
  })

  it('a person who denies sends the client back with access_denied, and no grant', async () => {
    const provider = new MemoryProvider(callback.url)
    const transport = new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), { authProvider: provider })
    await expect(new Client({ name: 'test', version: '1.0.0' }).connect(transport)).rejects.toThrow(/Unauthorized/)
    const context = await browser.newContext()
    expect(await consent(await context.newPage(), provider.authorizationUrl!, 'alice', 'Deny')).toBe('error:access_denied')
    await context.close()
  })
})
