// The error catalogue: the table in docs/errors.md matches src/errors.ts, and every error renders as JSON
// for API clients and as a small HTML page for browsers, never with a stack trace.
import { readFile } from 'node:fs/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/config.js'
import { ERRORS, GatewayError } from '../../src/errors.js'
import { buildGateway } from '../../src/gateway.js'
import { pastExp, tokenEnded } from '../../src/routes/bearer-holds.js'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { logCollector } from '../helpers/gateway.js'

describe('error catalogue', () => {
  it('the error table of docs/errors.md lists exactly the codes and statuses of src/errors.ts', async () => {
    const table = await readFile('docs/errors.md', 'utf8')
    const rows = [...table.matchAll(/^\|[^|\n]*\|\s*(\d{3})\s*\|\s*`(\w+)`/gm)].map(([, status, code]) => [code, Number(status)])
    const fromTable = Object.fromEntries(rows)
    const expected = Object.fromEntries(Object.entries(ERRORS).map(([code, entry]) => [code, entry.status]))
    expect(fromTable).toEqual(expected)
  })
})

describe('error rendering', () => {
  let app: FastifyInstance
  const logs = logCollector()

  beforeAll(async () => {
    app = await buildGateway(parseConfig('', {}), { logStream: logs.stream })
    app.get('/boom', async () => { throw new Error('secret internals at /srv/app.js:12') })
    // A request the access hook allowed, then refused on the way (a websocket whose token or session ended on the way).
    const admitted = (request: FastifyRequest) => { request.audit = { decision: 'allow', user: 'alice', rule: 'allow[0]', credential: 'bearer' } }
    app.get('/admitted/ended', { onRequest: async (request) => { admitted(request) } }, async () => { throw tokenEnded() })
    app.get('/admitted/expired', { onRequest: async (request) => { admitted(request) } }, async () => { throw pastExp() })
    app.get('/admitted/forbidden', { onRequest: async (request) => { admitted(request) } }, async () => { throw new GatewayError('forbidden', 'Not from this site.') })
    app.get('/admitted/upstream', { onRequest: async (request) => { admitted(request) } }, async () => { throw new GatewayError('bad_gateway', 'The upstream did not answer.') })
    app.get('/admitted/timeout', { onRequest: async (request) => { admitted(request) } }, async () => { throw new GatewayError('gateway_timeout', 'The upstream did not answer in time.') })
    app.get('/admitted/encoded', { onRequest: async (request) => { admitted(request) } }, async () => { throw new GatewayError('unsupported_media_type', 'A form sent gzip-encoded is not read.') })
    app.get('/admitted/large', { onRequest: async (request) => { admitted(request) } }, async () => { throw new GatewayError('payload_too_large', 'Too large to read.') })
    app.get('/admitted/shutdown', { onRequest: async (request) => { admitted(request) } }, async () => { throw new GatewayError('shutting_down', 'The gateway is shutting down.') })
    app.get('/admitted/thrown', { onRequest: async (request) => { admitted(request) } }, async () => { throw new Error('a bug') })
    await app.ready()
  })
  afterAll(async () => { await app.close() })

  it('renders JSON { error, message } for JSON, */* and no Accept', async () => {
    for (const accept of ['application/json', '*/*', undefined]) {
      const response = await app.inject({ url: '/oauth/login/nope/', headers: accept ? { accept } : {} })
      expect(response.statusCode).toBe(404)
      expect(response.headers['content-type']).toMatch(/^application\/json/)
      expect(response.json()).toEqual({ error: 'unknown_provider', message: 'No provider named "nope" is configured.' })
    }
  })

  it('renders a small HTML page with the code and a link to start over for browsers', async () => {
    const response = await app.inject({ url: '/oauth/login/%3Cscript%3E/', headers: { accept: 'text/html,*/*' } })
    expect(response.statusCode).toBe(404)
    expect(response.headers['content-type']).toMatch(/^text\/html/)
    expect(response.body).toContain('<code>unknown_provider</code>')
    expect(response.body).toContain('href="/oauth/"')
    expect(response.body).not.toContain('<script>')
  })

  it('answers 500 internal_error with a generic message; the details go to the log only', async () => {
    const response = await app.inject({ url: '/boom', headers: { accept: 'application/json' } })
    expect(response.statusCode).toBe(500)
    expect(response.json()).toEqual({ error: 'internal_error', message: 'An unexpected error occurred.' })
    const page = await app.inject({ url: '/boom', headers: { accept: 'text/html' } })
    expect(page.body).not.toContain('secret internals')
    expect(page.body).not.toMatch(/at .*\.js:\d+/)
    expect(logs.lines.join('\n')).toContain('secret internals')
  })

  it('answers 404 not_found for an address nothing serves', async () => {
    const response = await app.inject({ url: '/nothing-here' })
    expect(response.statusCode).toBe(404)
    expect(response.json()).toMatchObject({ error: 'not_found' })
  })

  // One place for every refusal after admission: an audit selecting on `decision` never lists it as admitted.
  it.each([
    ['/admitted/ended', 401, { decision: 'token_refused', reason: 'inactive' }],
    ['/admitted/expired', 401, { decision: 'token_refused', reason: 'expired' }],
    ['/admitted/forbidden', 403, { decision: 'forbidden' }],
    ['/admitted/upstream', 502, { decision: 'allow' }],
    ['/admitted/timeout', 504, { decision: 'allow' }],
    ['/admitted/encoded', 415, { decision: 'invalid_request' }],
    ['/admitted/large', 413, { decision: 'invalid_request' }],
    ['/admitted/shutdown', 503, { decision: 'unavailable' }],
    ['/admitted/thrown', 500, { decision: 'allow' }],
  ])('a request the access hook allowed, answered %s by the gateway: its log line says the refusal, or still allow for an upstream\'s failure or the gateway\'s own', async (url, status, fields) => {
    const response = await app.inject({ url, headers: { accept: 'application/json' } })
    expect(response.statusCode).toBe(status)
    const line = logs.lines.map((text) => JSON.parse(text) as Record<string, unknown>).findLast((entry) => entry.url === url && entry.statusCode === status)
    expect(line).toMatchObject({ ...fields, user: 'alice', rule: 'allow[0]', credential: 'bearer' })
    if (!('reason' in fields)) expect(line).not.toHaveProperty('reason')
  })

  it('answers /healthz 200', async () => {
    expect((await app.inject({ url: '/healthz' })).json()).toEqual({ status: 'ok' })
  })
})
