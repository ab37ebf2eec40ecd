// A failed discovery names the URL it fetched and what came back (the HTTP status, or the network
// error's code), against real local servers: one answering 404, one answering a web page, and a
// port where nothing listens. The URL in the log has no query and no credentials.
import { createServer, type Server } from 'node:http'
import { Writable } from 'node:stream'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/config.js'
import { discoveryUrl, networkCode } from '../../src/oauth/discovery-failure.js'
import { Providers } from '../../src/oauth/providers.js'
import { close, listen, refusedUrl } from '../helpers/net.js'

const SECRET = 'q3Vt8mJ0bXcE1s7yKp2RzL9wH4dNfA6gUoTiC5eBvMk='

interface Logged { msg: string, url?: string, status?: number, code?: string, reason?: string }

/** The error line a one-attempt warm-up of a provider at `issuer` logs; resolves when it is written. */
async function discoveryLog (issuer: string): Promise<Logged> {
  const config = parseConfig(`session:\n  secret: ${SECRET}\nproviders:\n  op:\n    clientId: c\n    clientSecret: s\n    issuer: ${issuer}\n    scope: openid\nroutes:\n  - path: /app/\n    upstream: http://127.0.0.1:9\n    provider: op\n`, {})
  return await new Promise((resolve) => {
    const stream = new Writable({
      write (chunk: Buffer, _encoding, callback) {
        for (const line of chunk.toString().split('\n').filter(Boolean)) {
          const entry = JSON.parse(line) as Logged & { level: number }
          if (entry.level === 50) resolve(entry)
        }
        callback()
      },
    })
    new Providers(config.providers, pino(stream)).warmUp(1)
  })
}

describe('a failed discovery', () => {
  const servers: Server[] = []
  let notFound: string
  let page: string

  beforeAll(async () => {
    const missing = createServer((_req, res) => res.writeHead(404, { 'content-type': 'text/plain' }).end('not found'))
    const html = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html>sign in</html>'))
    servers.push(missing, html)
    notFound = await listen(missing)
    page = await listen(html)
  })
  afterAll(async () => { for (const server of servers) await close(server) })

  it('names both issuers when the document names another one than the config (localhost written, 127.0.0.1 answering)', async () => {
    const other = createServer((_req, res) => {
      const port = (other.address() as { port: number }).port
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ issuer: `http://127.0.0.1:${port}`, authorization_endpoint: `http://127.0.0.1:${port}/auth`, token_endpoint: `http://127.0.0.1:${port}/token`, jwks_uri: `http://127.0.0.1:${port}/jwks` }))
    })
    servers.push(other)
    const url = await listen(other)
    const written = url.replace('127.0.0.1', 'localhost')
    const entry = await discoveryLog(written)
    expect(entry.reason).toBe(`the discovery document names the issuer "${url}", not "${written}": write the provider's issuer exactly as it names itself`)
  })

  it('logs the URL and the status of a 404', async () => {
    const entry = await discoveryLog(`${notFound}/realms/demo`)
    const url = `${notFound}/realms/demo/.well-known/openid-configuration`
    expect(entry).toMatchObject({ url, status: 404 })
    expect(entry.code).toBeUndefined()
    expect(entry.msg).toBe(`OIDC discovery failed for provider op (GET ${url}: HTTP 404); its sign-ins answer 502 provider_unavailable until it succeeds`)
  })

  it('logs the status of an answer that is not JSON, and oauth4webapi\'s reason', async () => {
    const entry = await discoveryLog(page)
    expect(entry).toMatchObject({ url: `${page}/.well-known/openid-configuration`, status: 200 })
    expect(entry.msg).toContain(': HTTP 200)')
    expect(entry.reason).toMatch(/content-type|JSON/i)
  })

  it('logs the network error\'s code for a port where nothing listens', async () => {
    const refused = await refusedUrl()
    const entry = await discoveryLog(refused)
    expect(entry).toMatchObject({ url: `${refused}/.well-known/openid-configuration`, code: 'ECONNREFUSED' })
    expect(entry.status).toBeUndefined()
    expect(entry.msg).toBe(`OIDC discovery failed for provider op (GET ${refused}/.well-known/openid-configuration: ECONNREFUSED); its sign-ins answer 502 provider_unavailable until it succeeds`)
  })
})

describe('the discovery URL in a log line', () => {
  it.each([
    ['https://op.example.org', 'https://op.example.org/.well-known/openid-configuration'],
    ['https://op.example.org/tenant/', 'https://op.example.org/tenant/.well-known/openid-configuration'],
    ['https://op.example.org/t?api_key=hunter2', 'https://op.example.org/t/.well-known/openid-configuration'],
    ['https://op.example.org/t#frag', 'https://op.example.org/t/.well-known/openid-configuration'],
    ['https://user:hunter2@op.example.org/t', 'https://op.example.org/t/.well-known/openid-configuration'],
  ])('%s -> %s', (issuer, expected) => {
    expect(discoveryUrl(new URL(issuer))).toBe(expected)
  })

  it.each([
    [Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }) }), 'ECONNREFUSED'],
    [new DOMException('signal timed out', 'TimeoutError'), 'timeout'],
    [new TypeError('fetch failed', { cause: new AggregateError([Object.assign(new Error('a'), { code: 'ENETUNREACH' })]) }), 'ENETUNREACH'],
    [new Error('no code'), undefined],
    ['a string', undefined],
  ])('the network code of %s', (error, code) => {
    expect(networkCode(error)).toBe(code)
  })
})
