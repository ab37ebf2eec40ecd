// Bodies the gateway would judge in another form than the application reads them (found by an
// outside tester). A form's `_method` hidden by compressing the body: the gateway read the
// compressed bytes and found no `_method`, and an application whose body parser inflates request
// bodies (Express's body-parser does by default) read `_method=DELETE` inside: a public `POST
// /blog/comments` became an anonymous DELETE, a route that allows GET and POST a DELETE. Now such a
// body is refused, 415 `unsupported_media_type`. And a transfer coding besides chunked
// (`Transfer-Encoding: gzip, chunked`), which Node decodes only of its chunks: forwarded, the
// upstream read the gzip bytes as the plain body; now 400 at the edge, the upstream not called.
import { createServer, type IncomingMessage, type Server } from 'node:http'
import { connect } from 'node:net'
import type { Readable } from 'node:stream'
import { brotliCompressSync, createBrotliDecompress, createGunzip, createInflate, deflateSync, gzipSync } from 'node:zlib'
import { afterAll, describe, expect } from 'vitest'
import { contentCoded } from '../../src/routes/method-override-hook.js'
import { signIn } from '../helpers/browser.js'
import type { TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'
import { test as it } from '../helpers/stack.js'

/** What the application acted on: the method after `_method`, and the body it read. */
interface Acted { method: string, body: string }

let app: Server
let gateway: TestGateway
let port: number
const acted: Acted[] = []

/** The request body as Express's body-parser reads it: inflated per Content-Encoding (its default). */
function inflated (request: IncomingMessage): Readable {
  switch ((request.headers['content-encoding'] ?? 'identity').toLowerCase()) {
    case 'gzip': return request.pipe(createGunzip())
    case 'deflate': return request.pipe(createInflate())
    case 'br': return request.pipe(createBrotliDecompress())
    default: return request
  }
}

it.beforeAll(async ({ startStack }) => {
  // An Express-like application: body-parser.urlencoded(), then method-override's documented body getter.
  app = createServer((request, response) => {
    const chunks: Buffer[] = []
    const body = inflated(request)
    body.on('data', (chunk: Buffer) => chunks.push(chunk))
    body.on('error', () => { response.statusCode = 400; response.end() })
    body.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      const named = new URLSearchParams(text).get('_method')
      acted.push({ method: request.method === 'POST' && named !== null ? named.toUpperCase() : request.method!, body: text })
      response.setHeader('content-type', 'application/json')
      response.end('{}')
    })
  })
  const upstream = await listen(app)
  gateway = await startStack({
    routes: [
      { path: '/blog/', upstream, provider: 'demo', public: ['GET /blog/*', 'POST /blog/comments'] },
      { path: '/notes/', upstream, provider: 'demo', allow: [{ methods: ['GET', 'POST'] }] },
      { path: '/open/', upstream, auth: 'none' },
    ],
  })
  port = Number(new URL(gateway.url).port)
})

afterAll(async () => {
  await gateway?.close()
  if (app) await close(app)
})

/** Sends `head` lines and `body` on a raw socket; the status line's code and the answer's head. */
async function raw (head: string[], body: Buffer): Promise<{ status: number, head: string }> {
  return await new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write([...head, 'Host: gateway', 'Accept: application/json', 'Connection: close', '', ''].join('\r\n'))
      socket.write(body)
    })
    let data = ''
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => { data += chunk })
    socket.on('error', reject)
    socket.on('close', () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0), head: data.split('\r\n\r\n', 1)[0]! }))
  })
}

const FORM = 'Content-Type: application/x-www-form-urlencoded'
const DELETE_FORM = Buffer.from('_method=DELETE')
const CODED: Array<[string, Buffer]> = [
  ['gzip', gzipSync(DELETE_FORM)],
  ['deflate', deflateSync(DELETE_FORM)],
  ['br', brotliCompressSync(DELETE_FORM)],
  ['GZIP', gzipSync(DELETE_FORM)],
  ['identity, gzip', gzipSync(DELETE_FORM)],
  [' x-custom ', gzipSync(DELETE_FORM)],
]

describe('a form whose body is compressed, on a route whose rules or public rules name methods', () => {
  it('a plain _method=DELETE is refused (403), as before', async () => {
    const before = acted.length
    expect((await raw(['POST /blog/comments HTTP/1.1', FORM, `Content-Length: ${DELETE_FORM.length}`], DELETE_FORM)).status).toBe(403)
    expect(acted.slice(before)).toEqual([])
  })

  it.each(CODED)('public POST, Content-Encoding %j: 415 unsupported_media_type with Accept-Encoding: identity, the application never called', async (coding, body) => {
    const before = acted.length
    const answer = await raw(['POST /blog/comments HTTP/1.1', FORM, `Content-Length: ${body.length}`, `Content-Encoding: ${coding}`], body)
    expect([answer.status, /\r\naccept-encoding: identity\r\n/i.test(answer.head)]).toEqual([415, true])
    expect(acted.slice(before)).toEqual([])
  })

  it('signed in, on a route that allows GET and POST: a compressed _method=DELETE is 415, a plain POST and an identity-coded one pass', async ({ gatewayAddress }) => {
    const { cookie } = await signIn(`${gatewayAddress.baseUrl}/notes/`, 'alice')
    const before = acted.length
    const body = gzipSync(DELETE_FORM)
    const logged = gateway.logs.length
    expect((await raw(['POST /notes/x HTTP/1.1', FORM, `Cookie: ${cookie}`, `Content-Length: ${body.length}`, 'Content-Encoding: gzip'], body)).status).toBe(415)
    expect(acted.slice(before)).toEqual([])
    // Admitted by the rules, then answered by the gateway itself: its line is no `allow` (an attacker's finding).
    const line = gateway.logs.slice(logged).map((text) => JSON.parse(text) as Record<string, unknown>).find((entry) => entry.statusCode === 415)
    expect(line).toMatchObject({ decision: 'invalid_request', user: 'alice', credential: 'session' })
    // A Content-Encoding is named in the answer, never more than 40 characters of it.
    const long = await raw(['POST /notes/x HTTP/1.1', FORM, `Cookie: ${cookie}`, `Content-Length: ${body.length}`, `Content-Encoding: gzip${'x'.repeat(500)}`], body)
    expect(long.status).toBe(415)
    expect(gateway.logs.slice(logged).join('\n')).not.toContain('x'.repeat(41))
    const plain = Buffer.from('text=hello')
    expect((await raw(['POST /notes/x HTTP/1.1', FORM, `Cookie: ${cookie}`, `Content-Length: ${plain.length}`], plain)).status).toBe(200)
    expect((await raw(['POST /notes/x HTTP/1.1', FORM, `Cookie: ${cookie}`, `Content-Length: ${plain.length}`, 'Content-Encoding: identity'], plain)).status).toBe(200)
    expect(acted.slice(before)).toEqual([{ method: 'POST', body: 'text=hello' }, { method: 'POST', body: 'text=hello' }])
  })

  it('a route whose rules name no methods reads no body: a compressed one streams on, as it was sent', async () => {
    const before = acted.length
    const body = gzipSync(Buffer.from('anything'))
    expect((await raw(['POST /open/x HTTP/1.1', FORM, `Content-Length: ${body.length}`, 'Content-Encoding: gzip'], body)).status).toBe(200)
    expect(acted.slice(before)).toEqual([{ method: 'POST', body: 'anything' }])
  })
})

describe('a transfer coding besides chunked', () => {
  const chunked = (payload: Buffer) => Buffer.concat([Buffer.from(`${payload.length.toString(16)}\r\n`), payload, Buffer.from('\r\n0\r\n\r\n')])

  it.each(['gzip, chunked', 'deflate, chunked', 'x-custom, chunked', 'GZIP , chunked'])('Transfer-Encoding: %s is 400 invalid_request at the edge, the upstream not called', async (coding) => {
    const before = acted.length
    const answer = await raw(['POST /open/upload HTTP/1.1', 'Content-Type: text/plain', `Transfer-Encoding: ${coding}`], chunked(gzipSync(Buffer.from('not plain bytes'))))
    expect(answer.status).toBe(400)
    expect(acted.slice(before)).toEqual([])
  })

  it('Transfer-Encoding: chunked passes, the body whole', async () => {
    const before = acted.length
    expect((await raw(['POST /open/upload HTTP/1.1', 'Content-Type: text/plain', 'Transfer-Encoding: chunked'], chunked(Buffer.from('plain bytes')))).status).toBe(200)
    expect(acted.slice(before)).toEqual([{ method: 'POST', body: 'plain bytes' }])
  })
})

describe('contentCoded', () => {
  it.each<[string | undefined, boolean]>([
    [undefined, false], ['', false], ['identity', false], ['IDENTITY', false], [' identity , ', false],
    ['gzip', true], ['identity, gzip', true], ['x-custom', true], ['gzip, identity', true],
  ])('%j: %s', (header, coded) => {
    expect(contentCoded(header)).toBe(coded)
  })
})
