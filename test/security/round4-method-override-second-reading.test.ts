// A second outside reading of the _method fixes (4d3b770, f1d8829): bodies whose `_method` a real
// framework behind the gateway read while the gateway did not; every case failed on the code before.
// Each first sends the request straight to the application (it must act as DELETE there: the
// differential is real), then through the gateway, whose answer must be a refusal with the
// application never acting as DELETE.
//
//  - Express 4/5 with `express.urlencoded({ extended: true })` (body-parser 1.x's default when
//    `extended` is not given, as in method-override's README) parses with qs: qs/lib/parse.js
//    parseKeys takes a key starting with `[` as the segments `[..]` it finds and drops text outside
//    them, so `[_method]x=DELETE` is { _method: 'DELETE' } and `[_method][]=DELETE` is
//    { _method: ['DELETE'] } (method-override takes an array's first value). The real express,
//    body-parser 2.4 and qs 6.x from node_modules.
//  - Rack 2.2.24 lib/rack/multipart/parser.rb handle_mime_head: a Content-Disposition `name` is
//    passed through Rack::Auth::Digest::Params.dequote, which drops every backslash (`\\(.)` -> `\1`);
//    Rack 3.1/3.2 parse the quoted value with backslash escapes the same way. So
//    `name="\_method"` is `_method`.
//  - Rack 2.2 and 3.x find a part's head with @head_regex = /(.*?\r\n)\r\n/m: only CRLF CRLF ends
//    it; a bare `\n\n` inside is part of the head. Rack 2.2's MULTIPART_CONTENT_DISPOSITION
//    (`Content-Disposition:[^:]*;\s*name=`) reads across it, Rack 3.x's MULTIPART_CONTENT_ID
//    (`^Content-ID:` per line) finds a Content-ID after it. The gateway ends a part's headers at
//    the first `\n\n` (method-override.ts multipartValues); it now reads the block both ways (partValues).
import { createServer, type Server } from 'node:http'
import { afterAll, describe, expect } from 'vitest'
import { sessionCookie, type TestGateway } from '../helpers/gateway.js'
import { close, listen } from '../helpers/net.js'
import { bodyOf, differentials, expressApp as startExpress, type OverrideCase } from '../helpers/override-apps.js'
import { test as it } from '../helpers/stack.js'

type Framework = 'rack22' | 'rack3' | 'express'
const acted: Record<Framework, string[]> = { rack22: [], rack3: [], express: [] }

const RACK_METHODS = ['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'PATCH', 'LINK', 'UNLINK']

/** Rack 2.2 normalize_params' top level: %r(\A[\[\]]*([^\[\]]+)\]*), a plain value when nothing follows. */
function rack22Key (name: string): string | undefined {
  const match = /^[[\]]*([^[\]]+)\]*/.exec(name)
  return match !== null && name.length === match[0].length ? match[1] : undefined
}
/** Rack 3.x normalize_params' top level: a plain value only for a name with no `[` after its first character. */
function rack3Key (name: string): string | undefined {
  return name.indexOf('[', 1) === -1 ? name : undefined
}
/** Rack::Auth::Digest::Params.dequote (Rack 2.2.24): outer quotes dropped, then every `\x` is `x`. */
function dequote (text: string): string {
  const quoted = /^"(.*)"$/s.exec(text)
  return (quoted === null ? text : quoted[1]!).replace(/\\(.)/gs, '$1')
}
/** Rack 3.1/3.2 handle_mime_head's quoted-value loop for the `name` parameter: `\x` is `x`. */
function rack3Disposition (disposition: string): string | undefined {
  let rest = disposition.slice(disposition.indexOf(';') + 1)
  let name: string | undefined
  for (let at = rest.indexOf('='); at !== -1; at = rest.indexOf('=')) {
    const param = rest.slice(0, at).trimStart()
    rest = rest.slice(at + 1)
    let value = ''
    if (rest.startsWith('"')) {
      rest = rest.slice(1)
      for (let i = 0; i < rest.length; i++) {
        if (rest[i] === '"') { rest = rest.slice(i + 1); break }
        if (rest[i] === '\\') i++
        value += rest[i] ?? ''
      }
    } else {
      const semi = rest.indexOf(';')
      value = semi === -1 ? rest.trim() : rest.slice(0, semi)
      rest = semi === -1 ? '' : rest.slice(semi)
    }
    if (param === 'name') name = value
    const semi = rest.indexOf(';')
    if (semi !== -1) rest = rest.slice(semi + 1)
  }
  return name
}

/** A multipart body as Rack reads it: each part's head ends at the first CRLF CRLF (@head_regex). */
function rackMultipart (body: Buffer, contentType: string, version: '2.2' | '3'): Map<string, string> {
  const fields = new Map<string, string>()
  const boundary = /^multipart\/.*?boundary(\s*)="?([^";,]+)"?/i.exec(contentType)?.[2]
  if (boundary === undefined) return fields
  for (const part of body.toString('latin1').split(new RegExp(`(?:\\r\\n)?--${boundary}(?:\\r\\n|--)`)).slice(1)) {
    const split = part.indexOf('\r\n\r\n')
    if (split === -1) continue
    const head = part.slice(0, split + 2)
    const data = part.slice(split + 4)
    let name: string | undefined
    if (version === '2.2') {
      const unfolded = head.replace(/\r\n([ \t])/g, '$1')
      // MULTIPART_CONTENT_DISPOSITION = /Content-Disposition:[^:]*;\s*name=(VALUE)/ni, VALUE = /"(?:\\"|[^"])*"|TOKEN/
      const disposition = /Content-Disposition:[^:]*;\s*name=("(?:\\"|[^"])*"|[^\s()<>,;:\\"/[\]?=]+)/i.exec(unfolded)?.[1]
      name = disposition !== undefined ? dequote(disposition) : /Content-ID:\s*([^\r\n]*)/i.exec(unfolded)?.[1]
      if (/filename=/i.test(unfolded)) continue
      const key = name === undefined ? undefined : rack22Key(name)
      if (key !== undefined) fields.set(key, data)
    } else {
      // MULTIPART_CONTENT_DISPOSITION = /^Content-Disposition:FWS?(HEADER_VALUE)/ni, MULTIPART_CONTENT_ID = /^Content-ID:FWS?(HEADER_VALUE)/ni
      const disposition = /^Content-Disposition:[ \t]*((?:[^\r\n]|\r\n[ \t])*)/im.exec(head)?.[1]
      name = disposition !== undefined ? rack3Disposition(disposition) : /^Content-ID:[ \t]*((?:[^\r\n]|\r\n[ \t])*)/im.exec(head)?.[1]
      const key = name === undefined ? undefined : rack3Key(name)
      if (key !== undefined) fields.set(key, data)
    }
  }
  return fields
}

/** Rack::MethodOverride: a POST's req.POST['_method'], upper-cased, if it is an HTTP method. */
function rackMethod (version: '2.2' | '3', method: string, contentType: string | undefined, body: Buffer): string {
  if (method !== 'POST' || contentType === undefined || !/^multipart\//i.test(contentType)) return method
  const named = rackMultipart(body, contentType, version).get('_method')?.toUpperCase()
  return named !== undefined && RACK_METHODS.includes(named) ? named : method
}

let rack22App: Server
let rack3App: Server
let expressApp: Server
let gateway: TestGateway
let port: number
let cookie: string
const direct: Record<Framework, number> = { rack22: 0, rack3: 0, express: 0 }

it.beforeAll(async ({ startStack }) => {
  rack22App = createServer((request, response) => {
    void bodyOf(request).then((body) => {
      acted.rack22.push(rackMethod('2.2', request.method!, request.headers['content-type'], body))
      response.end('{}')
    })
  })
  rack3App = createServer((request, response) => {
    void bodyOf(request).then((body) => {
      acted.rack3.push(rackMethod('3', request.method!, request.headers['content-type'], body))
      response.end('{}')
    })
  })
  // Express with the extended (qs) urlencoded parser (test/helpers/override-apps.ts).
  expressApp = startExpress(true, acted.express)
  const [r22, r3, exp] = await Promise.all([listen(rack22App), listen(rack3App), listen(expressApp)])
  direct.rack22 = Number(new URL(r22).port)
  direct.rack3 = Number(new URL(r3).port)
  direct.express = Number(new URL(exp).port)
  gateway = await startStack({
    routes: [
      { path: '/rack22/', upstream: r22, provider: 'demo', public: ['GET /rack22/*', 'POST /rack22/comments'] },
      { path: '/rack3/', upstream: r3, provider: 'demo', public: ['GET /rack3/*', 'POST /rack3/comments'] },
      { path: '/express/', upstream: exp, provider: 'demo', public: ['GET /express/*', 'POST /express/comments'] },
      { path: '/guarded/', upstream: exp, provider: 'demo', deny: [{ methods: ['DELETE'] }] },
    ],
  })
  port = Number(new URL(gateway.url).port)
  cookie = await sessionCookie(gateway, 'alice')
})

afterAll(async () => {
  await gateway?.close()
  for (const server of [rack22App, rack3App, expressApp]) if (server) await close(server)
})

type Case = OverrideCase<Framework>

/** The application acts as DELETE when sent the request itself; through the gateway it is refused and never acts as DELETE. */
const differential = differentials(acted, direct, () => port)

const FORM = 'Content-Type: application/x-www-form-urlencoded'
const MULTIPART = 'Content-Type: multipart/form-data; boundary=b'
const part = (head: string) => Buffer.from(`--b\r\n${head}\r\n\r\nDELETE\r\n--b--\r\n`, 'latin1')

describe('an anonymous DELETE through a public POST: the application reads _method where the gateway does not', () => {
  it.each<[string, Case]>([
    ['Express + urlencoded({ extended: true }) (qs): [_method]x=DELETE', { framework: 'express', target: '/express/comments', headers: [FORM], body: Buffer.from('text=hi&[_method]x=DELETE') }],
    ['Express + urlencoded({ extended: true }) (qs): [_method][]=DELETE', { framework: 'express', target: '/express/comments', headers: [FORM], body: Buffer.from('[_method][]=DELETE') }],
    ['Express + urlencoded({ extended: true }) (qs): %5B_method%5D%5B0%5D=DELETE', { framework: 'express', target: '/express/comments', headers: [FORM], body: Buffer.from('%5B_method%5D%5B0%5D=DELETE') }],
    ['Rack 2.2: multipart name="\\_method" (dequote drops the backslash)', { framework: 'rack22', target: '/rack22/comments', headers: [MULTIPART], body: part('Content-Disposition: form-data; name="\\_method"') }],
    ['Rack 3.x: multipart name="_met\\hod" (quoted-pair)', { framework: 'rack3', target: '/rack3/comments', headers: [MULTIPART], body: part('Content-Disposition: form-data; name="_met\\hod"') }],
    ['Rack 2.2: a bare \\n\\n inside the part head, then ; name="_method"', { framework: 'rack22', target: '/rack22/comments', headers: [MULTIPART], body: part('Content-Disposition: form-data\n\n; name="_method"') }],
    ['Rack 3.x: a bare \\n\\n inside the part head, then Content-ID: _method', { framework: 'rack3', target: '/rack3/comments', headers: [MULTIPART], body: part('X-Note: hi\n\nContent-ID: _method') }],
  ])('%s', async (_name, request) => {
    const outcome = await differential(request)
    // The differential is real: sent straight to it, the application acts as DELETE.
    expect(outcome.direct).toBe('DELETE')
    // Secure: the gateway refuses, and the application never acts as DELETE.
    expect({ refused: outcome.status >= 400, deleted: outcome.acted.includes('DELETE') }).toEqual({ refused: true, deleted: false })
  })
})

describe('signed in, on a route whose rules name methods', () => {
  it('deny: [{ methods: [DELETE] }] in front of Express (extended urlencoded): [_method]x=DELETE is refused', async () => {
    const outcome = await differential({ framework: 'express', target: '/guarded/x', headers: [FORM, `Cookie: ${cookie}`], body: Buffer.from('[_method]x=DELETE') })
    expect(outcome.direct).toBe('DELETE')
    expect({ status: outcome.status, deleted: outcome.acted.includes('DELETE') }).toEqual({ status: 403, deleted: false })
  })
})
