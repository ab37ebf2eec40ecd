// Security round 4: a multipart body whose boundary the gateway and the application read differently
// cannot hide a `_method` field. Content-Types that Rack 2.2 or PHP 8 read as another boundary than
// RFC 2046 gives (cut at `,`, text after a closing quote, a `boundary` inside another parameter's
// name) are refused with 400 as ambiguous; a part named by its Content-ID alone (Rack's reading) is
// judged as a field. Behind the gateway an application that honours `_method` and reads boundaries as
// Rack and PHP do (test/helpers/override-upstream.ts); a real provider, real Redis, a signed-in person.
import { afterAll, describe, expect } from 'vitest'
import { send } from '../helpers/form-upstream.js'
import { sessionCookie, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import { effectiveMethod, startOverrideUpstream, type OverrideUpstream } from '../helpers/override-upstream.js'
import type { TestRedis } from '../helpers/redis.js'

let redis: TestRedis
let app: OverrideUpstream
let gateway: TestGateway
let cookie: string

it.beforeAll(async ({ startStack, redis: fileRedis }) => {
  redis = fileRedis
  app = await startOverrideUpstream()
  gateway = await startStack({
    store: { type: 'redis', url: redis.url },
    routes: [
      { path: '/app/', upstream: app.url, provider: 'demo', allow: [{ methods: ['GET', 'POST'] }] },
      { path: '/guarded/', upstream: app.url, provider: 'demo', deny: [{ methods: ['DELETE', 'PUT', 'PATCH'] }] },
      { path: '/open/', upstream: app.url, provider: 'demo' },
    ],
  })
  cookie = await sessionCookie(gateway, 'alice')
})

afterAll(async () => {
  await gateway?.close()
  await app?.close()
})

interface Outcome { status: number, error: string | undefined, message: string | undefined, reached: boolean, method: string | undefined }

/** A POST of `body` to `path` as the signed-in person; what came back and what the application handled. */
async function post (path: string, body: string, contentType: string): Promise<Outcome> {
  const before = app.handled.length
  const answer = await send(`${gateway.url}${path}`, { method: 'POST', headers: { accept: 'application/json', cookie, 'content-type': contentType }, body })
  const handled = app.handled.slice(before)
  const problem = answer.status >= 400 ? JSON.parse(answer.body) as { error: string, message?: string } : undefined
  return { status: answer.status, error: problem?.error, message: problem?.message, reached: handled.length > 0, method: handled[0]?.method }
}

const DELETE_BODY = '--AAA\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--AAA--\r\n'
const AMBIGUOUS = [
  'multipart/form-data;boundary=AAA,x',
  'multipart/form-data; boundary="AAA"x',
  'multipart/form-data; xboundary=AAA; boundary=ZZZ',
  'multipart/form-data; boundary=ZZZ; xboundary=AAA',
  'multipart/form-data; boundary=ZZZ; boundary=AAA',
  'multipart/form-data; boundary="AAA,x"',
  'multipart/form-data; boundary=AAA;boundary=ZZZ',
  'multipart/related; boundary=ZZZ;boundary=AAA',
]

describe('a boundary read differently by the gateway and the application', () => {
  it.each(AMBIGUOUS)('the application would act on DELETE for %j', (type) => {
    expect(effectiveMethod('POST', '/app/x', type, Buffer.from(DELETE_BODY))).toBe('DELETE')
  })

  it.each(AMBIGUOUS.flatMap((type) => [['/app/upload', type], ['/guarded/upload', type]]))('%s refuses %j with 400 invalid_request (ambiguous); the application never sees it', async (path, type) => {
    const outcome = await post(path, DELETE_BODY, type)
    expect(outcome).toMatchObject({ status: 400, error: 'invalid_request', reached: false })
    expect(outcome.message).toContain('the multipart boundary is ambiguous')
  })

  it.each([
    'multipart/form-data; boundary=AAA',
    'multipart/form-data; boundary="AAA"',
    'Multipart/Form-Data; charset=utf-8; BOUNDARY=AAA',
  ])('still refuses an unambiguous %j with 403 forbidden', async (type) => {
    expect(await post('/app/upload', DELETE_BODY, type)).toMatchObject({ status: 403, error: 'forbidden', reached: false })
  })

  it('forwards an ordinary upload with an unambiguous boundary', async () => {
    const body = '--AAA\r\nContent-Disposition: form-data; name="title"\r\n\r\nhello\r\n--AAA--\r\n'
    expect(await post('/app/upload', body, 'multipart/form-data; boundary=AAA')).toMatchObject({ status: 200, reached: true, method: 'POST' })
  })

  it('leaves a route whose rules name no methods as it was (the body is not read)', async () => {
    expect(await post('/open/upload', DELETE_BODY, 'multipart/form-data;boundary=AAA,x')).toMatchObject({ status: 200, reached: true, method: 'DELETE' })
  })
})

describe('a part named _method by its Content-ID', () => {
  const byId = (boundary: string, id: string) => `--${boundary}\r\nContent-ID: ${id}\r\n\r\nDELETE\r\n--${boundary}--\r\n`

  it.each([
    ['multipart/form-data; boundary=AAA', '_method'],
    ['multipart/related; boundary=AAA', '_method'],
    ['multipart/related; boundary=AAA', '  _method'],
  ])('under %j (Content-ID %j) is refused with 403', async (type, id) => {
    expect(effectiveMethod('POST', '/app/x', type, Buffer.from(byId('AAA', id)))).toBe('DELETE')
    expect(await post('/app/upload', byId('AAA', id), type)).toMatchObject({ status: 403, error: 'forbidden', reached: false })
    expect(await post('/guarded/upload', byId('AAA', id), type)).toMatchObject({ status: 403, error: 'forbidden', reached: false })
  })

  it('forwards a part whose Content-ID is another name', async () => {
    expect(await post('/app/upload', byId('AAA', '<part1@example.org>'), 'multipart/related; boundary=AAA')).toMatchObject({ status: 200, reached: true, method: 'POST' })
  })
})
