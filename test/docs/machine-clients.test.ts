// docs/machine-clients.md stays true: every gateway.yaml block of the page is valid, and the answers
// the page shows (the 401 and 403 with their WWW-Authenticate, the RFC 9728 document) are the ones a
// gateway started with the page's own blocks sends, to tokens from a real authorization server.
import { readFileSync } from 'node:fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { parseConfig } from '../../src/config/config.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from '../helpers/gateway.js'
import { clientCredentialsToken } from '../helpers/machine.js'
import { startOidcProvider, type TestProvider } from '../helpers/oidc.js'
import { startUpstream, type Upstream } from '../helpers/upstream.js'

const PAGE = 'docs/machine-clients.md'
const text = readFileSync(PAGE, 'utf8')
/** The addresses the page writes, replaced by the live ones before comparing. */
const PAGE_GATEWAY = 'https://gateway.example.com'
const PAGE_ISSUER = 'https://login.example.com'

/** The provider a block that starts at `routes:` relies on: the page's `corp`. */
const CORP = 'providers:\n  corp: { issuer: https://login.example.com, clientId: c, clientSecret: s, scope: openid email }\n'

/** Each gateway.yaml block of the page (not a CI system's own file), with the heading it stands under. */
const blocks = text.split(/^## /m).slice(1).flatMap((section) => {
  const heading = section.slice(0, section.indexOf('\n'))
  return [...section.matchAll(/^```yaml\n([\s\S]*?)^```$/gm)].map(([, block]) => [heading, block!] as const)
  // "Try it on your machine" is run as written against the demo's provider (test/demo-provider.test.ts).
}).filter(([heading, block]) => heading !== 'Try it on your machine' && /^(?:providers|routes):/m.test(block))

/** Each `${NAME}` of a block, set to a placeholder. */
function envOf (block: string): Record<string, string> {
  return Object.fromEntries([...block.matchAll(/\$\{(\w+)\}/g)].map(([, name]) => [name!, `${name!.toLowerCase()}-value`]))
}

/** The block under a heading of the page (its first YAML block). */
function blockUnder (heading: string): string {
  const section = text.split(/^## /m).find((part) => part.startsWith(`${heading}\n`))
  const block = section === undefined ? undefined : /^```yaml\n([\s\S]*?)^```$/m.exec(section)?.[1]
  if (block === undefined) throw new Error(`${PAGE} has no YAML block under "${heading}"`)
  return block
}

describe('the gateway.yaml blocks of docs/machine-clients.md', () => {
  it('are there to check, each with a bearer block', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(6)
    for (const [, block] of blocks) expect(block).toContain('bearer:')
  })

  it.each(blocks)('"%s": its block is a valid gateway.yaml', (_heading, block) => {
    // A block that names only its own issuer relies on the page's `corp` for people.
    const yaml = block.startsWith('routes:') ? CORP + block : block.includes('provider: corp') && !block.includes('  corp:') ? block.replace(/^providers:\n/m, CORP) : block
    const config = parseConfig(yaml, envOf(block), PAGE)
    expect(config.routes.some((route) => route.bearer !== undefined)).toBe(true)
  })
})

describe('the answers docs/machine-clients.md shows', () => {
  const CI = { id: 'ci-deploy', secret: 'ci-secret' }
  const OTHER = { id: 'nightly-report', secret: 'other-secret' }
  let op: TestProvider
  let upstream: Upstream
  let gateway: TestGateway
  let rules: TestGateway

  /** A gateway with the page's block under `heading`, its provider `corp` at the test server, its upstream the test one. */
  async function gatewayOf (heading: string): Promise<TestGateway> {
    const raw = parse(blockUnder(heading)) as { routes: Array<Record<string, unknown>> }
    const { port, baseUrl } = await reserveBaseUrl()
    return await startGateway({
      server: { port, baseUrl },
      providers: { corp: oidcClient(op.issuer, 'c', 's', 'openid email') },
      routes: raw.routes.map((route) => ({ ...route, upstream: upstream.url })),
    })
  }

  beforeAll(async () => {
    upstream = await startUpstream()
    op = await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: ['http://127.0.0.1/unused'] }], {
      machineClients: [{ client_id: CI.id, client_secret: CI.secret }, { client_id: OTHER.id, client_secret: OTHER.secret }],
      resources: { 'api://orders': { scope: 'orders.read orders.write' }, 'api://ledger': { scope: 'ledger.read' } },
    })
    gateway = await gatewayOf('The bearer block')
    rules = await gatewayOf('Who may pass')
  })

  afterAll(async () => {
    await Promise.all([gateway?.close(), rules?.close()])
    await Promise.all([op?.close(), upstream?.close()])
  })

  /** The page's example answers: status line, WWW-Authenticate and body, with the live addresses. */
  function pageAnswers (): string[] {
    const live = text.replaceAll(PAGE_GATEWAY, gateway.url).replaceAll(PAGE_ISSUER, op.issuer)
    return [...live.matchAll(/^```text\n(HTTP\/1\.1 [\s\S]*?)^```$/gm)].map(([, answer]) => answer!.trim())
  }

  /** A live answer in the page's form. */
  async function answer (path: string, headers: Record<string, string>): Promise<string> {
    const response = await fetch(`${gateway.url}${path}`, { headers: { accept: 'application/json', ...headers } })
    return `HTTP/1.1 ${response.status} ${response.statusText}\nWWW-Authenticate: ${response.headers.get('www-authenticate')}\n\n${await response.text()}`
  }

  it('shows the 401 without a token, the 401 invalid_token and the 403 insufficient_scope exactly as sent', async () => {
    const otherAudience = await clientCredentialsToken(op, CI, 'api://ledger', 'ledger.read')
    const scopeShort = await clientCredentialsToken(op, CI, 'api://orders', 'orders.write')
    expect(pageAnswers()).toEqual([
      await answer('/orders/list', {}),
      await answer('/orders/list', { authorization: `Bearer ${otherAudience}` }),
      await answer('/orders/list', { authorization: `Bearer ${scopeShort}` }),
    ])
  })

  it('shows the metadata document as served', async () => {
    const live = text.replaceAll(PAGE_GATEWAY, gateway.url).replaceAll(PAGE_ISSUER, op.issuer)
    const shown = /^```json\n(\{"resource"[\s\S]*?)^```$/m.exec(live)?.[1]
    const response = await fetch(`${gateway.url}/.well-known/oauth-protected-resource/orders`)
    expect(shown?.trim()).toBe(await response.text())
  })

  it('lets a token with the scope through, unchanged, as the page says', async () => {
    const token = await clientCredentialsToken(op, CI, 'api://orders', 'orders.read')
    const response = await fetch(`${gateway.url}/orders/pass`, { headers: { authorization: `Bearer ${token}`, accept: 'text/html' } })
    expect(response.status).toBe(200)
    const seen = upstream.seen.filter((request) => request.url === '/orders/pass').at(-1)
    expect(seen?.headers).toMatchObject({ authorization: `Bearer ${token}`, 'x-forwarded-user': CI.id })
  })

  it('admits the CI client its "Who may pass" rule names, and refuses another client of the same audience', async () => {
    const ci = await clientCredentialsToken(op, CI, 'api://orders')
    const other = await clientCredentialsToken(op, OTHER, 'api://orders')
    const admitted = await fetch(`${rules.url}/orders/ci`, { headers: { authorization: `Bearer ${ci}` } })
    const refused = await fetch(`${rules.url}/orders/other`, { headers: { authorization: `Bearer ${other}` } })
    expect([admitted.status, refused.status]).toEqual([200, 403])
    expect(await refused.json()).toMatchObject({ error: 'forbidden' })
    expect(upstream.seen.some((request) => request.url === '/orders/other')).toBe(false)
  })
})
