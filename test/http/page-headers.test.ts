// The headers of the gateway's own pages and error answers (src/http/pages.ts PAGE_HEADERS), on
// pages any stranger can open. From an outside tester's reading: every page sent only
// `frame-ancestors 'none'`, and no answer said nosniff.
import { createHash } from 'node:crypto'
import { describe, expect } from 'vitest'
import type { TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

let gateway: TestGateway

it.beforeAll(async ({ startStack, upstream }) => {
  gateway = await startStack({
    agents: { deviceFlow: true },
    routes: [
      { path: '/app/', upstream: upstream.url, provider: 'demo' },
      { path: '/mcp', upstream: upstream.url, provider: 'demo', agents: true },
    ],
  })
})

const HTML = { accept: 'text/html' }

const PAGES: Array<[string, string]> = [
  ['the home page', '/oauth/'],
  ['a 404 page', '/nothing-here'],
  ['the sign-out everywhere confirmation', '/oauth/logout/?everywhere=1'],
  ['the unknown-provider page', '/oauth/login/nope/'],
  ['an agents authorization error page (oidc-provider\'s renderError)', '/oauth/agents/authorize?response_type=code'],
  ['the device flow\'s code page (oidc-provider\'s form)', '/oauth/agents/device'],
]

/** The policy's directives by name. */
function directives (policy: string): Map<string, string> {
  return new Map(policy.split(';').map((part) => part.trim()).filter(Boolean).map((part) => {
    const [name = '', ...values] = part.split(/\s+/)
    return [name, values.join(' ')]
  }))
}

describe('the gateway\'s pages load and run nothing of anyone\'s, and are never framed or sniffed', () => {
  it.each(PAGES)('%s', async (_what, path) => {
    const response = await fetch(`${gateway.url}${path}`, { headers: HTML, redirect: 'manual' })
    expect(response.headers.get('content-type')).toMatch(/^text\/html/)
    const policy = directives(response.headers.get('content-security-policy') ?? '')
    // No script at all (no script-src to widen it), inline style only, no <base>, no frame.
    expect(Object.fromEntries(policy)).toEqual({ 'default-src': "'none'", 'style-src': "'unsafe-inline'", 'base-uri': "'none'", 'frame-ancestors': "'none'" })
    expect(response.headers.get('x-content-type-options')).toBe('nosniff')
    expect(response.headers.get('x-frame-options')).toBe('DENY')
    expect(response.headers.get('referrer-policy')).toBe('same-origin')
  })

  it('the device flow\'s link with the code runs oidc-provider\'s one script that posts it, allowed by its hash alone', async () => {
    const response = await fetch(`${gateway.url}/oauth/agents/device?user_code=BCDF-GHJK`, { headers: HTML })
    const page = await response.text()
    const script = /<script>([\s\S]*?)<\/script>/.exec(page)?.[1]
    expect(script).toContain('document.forms[0].submit()')
    const policy = Object.fromEntries(directives(response.headers.get('content-security-policy') ?? ''))
    expect(policy).toEqual({ 'default-src': "'none'", 'style-src': "'unsafe-inline'", 'base-uri': "'none'", 'frame-ancestors': "'none'", 'script-src': `'sha256-${createHash('sha256').update(script!).digest('base64')}'` })
  })

  it('a JSON error answer is never sniffed as a page', async () => {
    const response = await fetch(`${gateway.url}/nothing-here`)
    expect(response.headers.get('content-type')).toMatch(/^application\/json/)
    expect(response.headers.get('x-content-type-options')).toBe('nosniff')
  })
})
