// Security round 4: a rule that admits POST but not DELETE is not walked around by `_method`. Behind
// the gateway an application that honours `_method` as Rails and Laravel do (a urlencoded or
// multipart body field, or the query); a real provider, real Redis, a person really signed in.
// Every spelling of the field an application reads as `_method` is refused (403, the application
// never reached); a POST whose `_method` names an allowed method, or none, reaches the application
// with the very bytes sent; a body too large to check is a 413; a route whose rules name no methods
// streams as before; a body cut short ends the request without reaching the application.
import { request as httpRequest } from 'node:http'
import { connect } from 'node:net'
import fc from 'fast-check'
import { afterAll, describe, expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { send } from '../helpers/form-upstream.js'
import { sessionCookie, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import { effectiveMethod, startOverrideUpstream, type OverrideUpstream } from '../helpers/override-upstream.js'
import type { TestRedis } from '../helpers/redis.js'

const FORM = 'application/x-www-form-urlencoded'
const MIB = 1024 * 1024

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
      { path: '/patch/', upstream: app.url, provider: 'demo', allow: [{ methods: ['GET', 'POST', 'PATCH'] }] },
      { path: '/guarded/', upstream: app.url, provider: 'demo', deny: [{ methods: ['DELETE'] }] },
      { path: '/open/', upstream: app.url, provider: 'demo' },
      { path: '/blog/', upstream: app.url, provider: 'demo', public: ['GET /blog/*', 'POST /blog/comments', 'PATCH /blog/comments'] },
      { path: '/kept/', upstream: app.url, provider: 'demo', preserveBody: '1KiB', allow: [{ methods: ['GET', 'POST'] }] },
      { path: '/uploads/', upstream: app.url, provider: 'demo', methodOverrideMaxBody: '3MiB', allow: [{ methods: ['GET', 'POST'] }] },
    ],
  })
  cookie = await sessionCookie(gateway, 'alice')
})

afterAll(async () => {
  await gateway?.close()
  await app?.close()
})

interface Outcome { status: number, error: string | undefined, reached: boolean, body: Buffer | undefined, method: string | undefined }

/** A POST (unless `method` says otherwise) of `body` to `path` as the signed-in person (`signedIn`); what came back and what the application handled. */
async function post (path: string, body: Buffer | string, contentType: string | undefined, method = 'POST', signedIn = true): Promise<Outcome> {
  const before = app.handled.length
  const headers: Record<string, string> = { accept: 'application/json', ...(signedIn ? { cookie } : {}) }
  if (contentType !== undefined) headers['content-type'] = contentType
  const answer = await send(`${gateway.url}${path}`, { method, headers, body })
  const handled = app.handled.slice(before)
  const error = answer.status >= 400 ? (JSON.parse(answer.body) as { error: string }).error : undefined
  return { status: answer.status, error, reached: handled.length > 0, body: handled[0]?.body, method: handled[0]?.method }
}

/** A multipart body of these parts (each its header lines and content), with its Content-Type. */
function multipart (parts: Array<[string[], Buffer | string]>, boundary = '----gw7MA4YWxkTrZu0gW'): { body: Buffer, type: string } {
  const chunks: Buffer[] = []
  for (const [headers, content] of parts) chunks.push(Buffer.from(`--${boundary}\r\n${headers.join('\r\n')}\r\n\r\n`, 'latin1'), Buffer.from(content), Buffer.from('\r\n'))
  chunks.push(Buffer.from(`--${boundary}--\r\n`))
  return { body: Buffer.concat(chunks), type: `multipart/form-data; boundary=${boundary}` }
}

const field = (name: string, value: string): [string[], string] => [[`Content-Disposition: form-data; name="${name}"`], value]
/** Bytes no text decoder keeps as they are: a file part must arrive byte for byte. */
const BINARY = Buffer.from(Array.from({ length: 512 }, (_, index) => (index * 37 + 11) % 256))

describe('a route that admits GET and POST, behind an application that honours _method', () => {
  it.each([
    ['_method=DELETE', FORM],
    ['_method=delete', FORM],
    ['title=x&_method=DELETE', 'Application/X-WWW-Form-Urlencoded; charset=utf-8'],
    ['_method=DELETE', ' application/x-www-form-urlencoded ;charset="UTF-8"'],
    ['_method=POST&_method=DELETE', FORM],
    ['_method=DELETE&_method=POST', FORM],
    ['_%6Dethod=DELETE', FORM],
    ['_method=%44ELETE', FORM],
    ['_method=PUT', FORM],
    ['.method=DELETE', FORM],
    ['_method[]=DELETE', FORM],
    ['title=x;_method=DELETE', FORM],
    ['_method=DEL%20ETE', FORM],
    ['_method=DELETE', undefined],
    ['_method=DELETE', ''],
    ['{"_method":"DELETE"}', 'application/json'],
    ['{"title":"x","_method":"delete"}', 'application/vnd.api+json; charset=utf-8'],
    // PHP cuts a field name at a NUL; Laravel reads a body as JSON when the header names JSON anywhere.
    ['_method%00=DELETE', FORM],
    ['title=x&_method%00x=DELETE', FORM],
    ['{"_method":"DELETE"}', 'text/plain; x=/json'],
    ['{"_method":"DELETE"}', `${FORM}; x=+json`],
  ])('refuses %j (%j) with 403 forbidden; the application never sees it', async (body, type) => {
    expect(await post('/app/form', body, type)).toMatchObject({ status: 403, error: 'forbidden', reached: false })
  })

  it.each([
    ['quoted', [field('_method', 'DELETE')]],
    ['lower case', [field('title', 'x'), field('_method', 'delete')]],
    ['unquoted name', [[['Content-Disposition: form-data; name=_method'], 'DELETE']]],
    ['NAME= and header case', [[['content-DISPOSITION: form-data; NAME="_method"'], 'DELETE']]],
    ['name after a filename hiding another', [[['Content-Disposition: form-data; filename="a; name=b"; name="_method"'], 'DELETE']]],
    ['RFC 5987 name*', [[['Content-Disposition: form-data; name*=utf-8\'\'%5Fmethod'], 'DELETE']]],
    ['after a binary file part', [[['Content-Disposition: form-data; name="file"; filename="a.bin"', 'Content-Type: application/octet-stream'], BINARY], field('_method', 'DELETE')]],
    ['repeated', [field('_method', 'POST'), field('_method', 'DELETE')]],
  ] as Array<[string, Array<[string[], Buffer | string]>]>)('refuses a multipart body whose _method part is %s', async (_name, parts) => {
    const { body, type } = multipart(parts)
    expect(await post('/app/upload', body, type)).toMatchObject({ status: 403, error: 'forbidden', reached: false })
  })

  it('refuses a multipart body whatever its subtype and the boundary\'s quoting', async () => {
    const { body } = multipart([field('_method', 'DELETE')], 'b')
    for (const type of ['multipart/form-data; boundary="b"', 'Multipart/Mixed; charset=utf-8; boundary=b']) {
      expect(await post('/app/upload', body, type)).toMatchObject({ status: 403, reached: false })
    }
  })

  it('refuses ?_method=DELETE in the query, on a form POST and on any other request', async () => {
    expect(await post('/app/form?_method=DELETE', 'title=x', FORM)).toMatchObject({ status: 403, error: 'forbidden', reached: false })
    expect(await post('/app/form?_method%00=DELETE', 'title=x', FORM)).toMatchObject({ status: 403, error: 'forbidden', reached: false })
    expect(await post('/app/form?a=1&_method=delete', 'binary', 'application/octet-stream')).toMatchObject({ status: 403, reached: false })
    const get = await fetch(`${gateway.url}/app/x?_method=DELETE`, { headers: { accept: 'application/json', cookie } })
    expect(get.status).toBe(403)
    // Only that method was refused (the request itself passed): the 403 names it and offers no other account.
    const body = await get.json() as Record<string, unknown>
    expect(body.refused_for).toEqual({ method: 'DELETE', path: '/app/x' })
    expect(body.switch_account_url).toBeUndefined()
  })

  it('names the refusal in the request\'s log line (the rule, and that a method override was refused)', async () => {
    await post('/app/logged', '_method=DELETE', FORM)
    const line = gateway.logs.map((text) => JSON.parse(text) as Record<string, unknown>).filter((entry) => entry.url === '/app/logged').at(-1)!
    expect(line).toMatchObject({ statusCode: 403, decision: 'forbidden', rule: 'none', reason: 'method_override' })
  })

  it.each([
    ['a plain form', 'title=hello&comment=%C3%A9t%C3%A9+%26+more', FORM],
    ['_METHOD (applications read _method, case-sensitively)', '_METHOD=DELETE', FORM],
    ['an empty _method', '_method=&title=x', FORM],
    ['_method=POST', '_method=post', FORM],
    ['a body no framework reads _method from', '_method=DELETE', 'text/plain'],
  ])('forwards %s with the very bytes sent', async (_name, body, type) => {
    const outcome = await post('/app/form', body, type)
    expect(outcome).toMatchObject({ status: 200, reached: true, method: 'POST' })
    expect(outcome.body!.equals(Buffer.from(body))).toBe(true)
  })

  it('forwards a multipart upload (a binary file part) byte for byte', async () => {
    const { body, type } = multipart([field('title', 'é'), [['Content-Disposition: form-data; name="file"; filename="_method"', 'Content-Type: application/octet-stream'], BINARY]])
    const outcome = await post('/app/upload', body, type)
    expect(outcome).toMatchObject({ status: 200, reached: true, method: 'POST' })
    expect(outcome.body!.equals(body)).toBe(true)
  })

  it('refuses a body larger than it reads (1 MiB) with 413 payload_too_large, by its length or as it streams', async () => {
    const large = `title=${'x'.repeat(MIB)}`
    expect(await post('/app/form', large, FORM)).toMatchObject({ status: 413, error: 'payload_too_large', reached: false })
    const before = app.handled.length
    const status = await new Promise<number>((resolve, reject) => {
      const outgoing = httpRequest(`${gateway.url}/app/form`, { method: 'POST', headers: { accept: 'application/json', cookie, 'content-type': FORM, 'transfer-encoding': 'chunked' } }, (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      outgoing.on('error', reject)
      for (let sent = 0; sent <= MIB; sent += 64 * 1024) outgoing.write('x'.repeat(64 * 1024))
      outgoing.end()
    })
    expect(status).toBe(413)
    expect(app.handled.length).toBe(before)
    // Just within the bound still passes.
    const within = `title=${'x'.repeat(MIB - 6)}`
    expect((await post('/app/form', within, FORM)).status).toBe(200)
  })

  it('reads as much as the route\'s methodOverrideMaxBody allows: a 2 MiB upload passes byte for byte, a _method in it is still judged', async () => {
    const { body, type } = multipart([field('title', 'report'), [['Content-Disposition: form-data; name="file"; filename="big.bin"', 'Content-Type: application/octet-stream'], Buffer.alloc(2 * MIB, 7)]])
    const outcome = await post('/uploads/file', body, type)
    expect(outcome).toMatchObject({ status: 200, reached: true, method: 'POST' })
    expect(outcome.body!.equals(body)).toBe(true)
    const overridden = multipart([[['Content-Disposition: form-data; name="file"; filename="big.bin"'], Buffer.alloc(2 * MIB, 7)], field('_method', 'DELETE')])
    expect(await post('/uploads/file', overridden.body, overridden.type)).toMatchObject({ status: 403, error: 'forbidden', reached: false })
    expect(await post('/app/file', body, type)).toMatchObject({ status: 413, error: 'payload_too_large', reached: false })
  })

  it('ends a body cut short without reaching the application, and serves the next request', async () => {
    const before = app.handled.length
    const port = Number(new URL(gateway.url).port)
    await new Promise<void>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.write(['POST /app/form HTTP/1.1', `Host: 127.0.0.1:${port}`, `Cookie: ${cookie}`, `Content-Type: ${FORM}`, 'Content-Length: 100', '', 'title=abc'].join('\r\n'))
        setImmediate(() => socket.destroy())
      })
      socket.on('error', reject)
      socket.on('close', () => resolve())
    })
    expect((await post('/app/form', 'title=next', FORM)).status).toBe(200)
    expect(app.handled.slice(before).map((handled) => handled.body.toString())).toEqual(['title=next'])
  })
})

describe('other method rules', () => {
  it('forwards _method=PATCH where the rules admit PATCH (the application acts on a PATCH), and refuses DELETE', async () => {
    const { body, type } = multipart([field('_method', 'PATCH'), [['Content-Disposition: form-data; name="file"; filename="a.bin"'], BINARY]])
    const outcome = await post('/patch/upload', body, type)
    expect(outcome).toMatchObject({ status: 200, method: 'PATCH' })
    expect(outcome.body!.equals(body)).toBe(true)
    expect(await post('/patch/form', '_method=PATCH', FORM)).toMatchObject({ status: 200, method: 'PATCH' })
    expect(await post('/patch/form', '_method=DELETE', FORM)).toMatchObject({ status: 403, reached: false })
  })

  it('holds a deny rule on DELETE against _method=DELETE, and lets other overrides pass', async () => {
    expect(await post('/guarded/form', '_method=delete', FORM)).toMatchObject({ status: 403, error: 'forbidden', reached: false })
    expect(await post('/guarded/form', '_method=PUT', FORM)).toMatchObject({ status: 200, method: 'PUT' })
  })

  it('leaves a route whose rules name no methods as it was: the body streams on, whatever its size', async () => {
    expect(await post('/open/form', '_method=DELETE', FORM)).toMatchObject({ status: 200, method: 'DELETE' })
    const large = Buffer.alloc(2 * MIB, 'a')
    const outcome = await post('/open/form', large, FORM)
    expect(outcome.status).toBe(200)
    expect(outcome.body!.equals(large)).toBe(true)
  })
})

describe('a public rule on POST, behind an application that honours _method', () => {
  const anonymous = async (path: string, body: string) => await post(path, body, FORM, 'POST', false)

  it.each([
    ['/blog/comments', '_method=DELETE'],
    ['/blog/comments?_method=PUT', 'text=hi'],
    ['/blog/comments', '_method%00=DELETE'],
    ['/blog/comments', '_method=DEL%20ETE'],
  ])('is no anonymous other method: POST %s with %j is refused 403 and never reaches the application', async (path, body) => {
    expect(await anonymous(path, body)).toMatchObject({ status: 403, error: 'forbidden', reached: false })
  })

  it('says why, in the 403 and the log line', async () => {
    const answer = await send(`${gateway.url}/blog/comments`, { method: 'POST', headers: { accept: 'application/json', 'content-type': FORM }, body: '_method=DELETE' })
    expect(JSON.parse(answer.body)).toMatchObject({ error: 'forbidden', message: 'This POST is public, but its _method names DELETE, which is not public on /blog/comments: send the request as that method, signed in.' })
    const line = gateway.logs.map((text) => JSON.parse(text) as Record<string, unknown>).filter((entry) => entry.url === '/blog/comments').at(-1)!
    expect(line).toMatchObject({ statusCode: 403, decision: 'forbidden', rule: 'public', reason: 'method_override' })
  })

  it('judges a public POST\'s _method only: a public GET or CORS preflight with ?_method= passes as it did', async () => {
    const get = await send(`${gateway.url}/blog/post?_method=preview`, { method: 'GET', headers: { accept: 'application/json' } })
    expect(get.status).toBe(200)
    const multipartDelete = multipart([[['Content-Disposition: form-data; name=\'_method\''], 'DELETE']])
    expect(await post('/blog/comments', multipartDelete.body, multipartDelete.type, 'POST', false)).toMatchObject({ status: 403, reached: false })
  })

  it('passes a plain public POST, and a _method the public rules admit on that path', async () => {
    expect(await anonymous('/blog/comments', 'text=hi')).toMatchObject({ status: 200, reached: true, method: 'POST' })
    expect(await anonymous('/blog/comments', '_method=PATCH&text=hi')).toMatchObject({ status: 200, reached: true, method: 'PATCH' })
  })
})

describe('a form kept through a sign-in (preserveBody)', () => {
  it('is judged when it is delivered: its _method=DELETE never reaches the application', async () => {
    const before = app.handled.length
    const kept = await send(`${gateway.url}/kept/form`, { body: 'title=x&_method=DELETE', headers: { 'content-type': FORM, 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'navigate' } })
    expect(kept.status).toBe(302)
    const token = (kept.headers['set-cookie'] ?? []).find((line) => line.startsWith('gw_session_form='))!.slice('gw_session_form='.length).split(';', 1)[0]!
    const browser = new Browser()
    browser.cookies.set('gw_session_form', { value: token, path: '/' })
    expect((await browser.navigate(new URL(kept.headers.location!, gateway.url).href, { login: 'alice' })).status).toBe(200)
    const delivered = await send(`${gateway.url}/kept/form`, { body: 'gateway-preserved-form=1', headers: { accept: 'application/json', 'content-type': FORM, cookie: browser.cookieHeader(`${gateway.url}/kept/form`) ?? '' } })
    expect(delivered.status).toBe(403)
    expect(app.handled.length).toBe(before)
  })
})

describe('what was judged is what is forwarded (property)', () => {
  const name = fc.oneof(fc.constantFrom('_method', '_METHOD', 'title', '_method[]', '.method', 'method', '_%6Dethod'), fc.string({ maxLength: 8 }))
  const value = fc.oneof(fc.constantFrom('GET', 'post', 'DELETE', 'delete', 'PATCH', 'Put', 'options', ''), fc.string({ maxLength: 12 }))
  const body = fc.array(fc.tuple(name, value, fc.boolean()), { maxLength: 6 }).map((pairs) => pairs.map(([key, text, encode]) => `${encode ? encodeURIComponent(key) : key}=${encode ? encodeURIComponent(text) : text}`).join('&'))

  it('a urlencoded body reaches the application unchanged, and never when its _method names a method the rules refuse', async () => {
    await fc.assert(fc.asyncProperty(body, async (text) => {
      const acted = effectiveMethod('POST', '/app/form', FORM, Buffer.from(text))
      const outcome = await post('/app/form', text, FORM)
      if (acted !== 'GET' && acted !== 'POST') expect(outcome.reached).toBe(false)
      if (outcome.reached) {
        expect(outcome.status).toBe(200)
        expect(outcome.body!.equals(Buffer.from(text))).toBe(true)
      } else {
        expect(outcome.status).toBe(403)
      }
    }), { numRuns: 60 })
  })
})
