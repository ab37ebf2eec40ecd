// The contract between the gateway's upstream pool and @fastify/reply-from (src/proxy/reply-from-adapter.ts):
// a real Fastify with @fastify/reply-from (as src/routes/proxy.ts registers it) sends through a real UpstreamPool to a real node:http
// upstream, and what reply-from hands to onResponse is what the adapter promises: `{ statusCode,
// headers, stream }` with the pool's own body (read whole when small and of declared length, else a
// stream) or the pool's UpstreamFailure. A reply-from upgrade that changes either fails here.
import replyFrom from '@fastify/reply-from'
import Fastify, { type FastifyInstance } from 'fastify'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Readable } from 'node:stream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { replyFromDispatcher, upstreamResponse, type ReplyFromResponse, type UpstreamResponse } from '../../src/proxy/reply-from-adapter.js'
import { StreamedBody, WholeBody } from '../../src/proxy/upstream-body.js'
import { UpstreamFailure, UpstreamPool } from '../../src/proxy/upstream-pool.js'
import { freePort } from '../helpers/net.js'

let upstream: Server
const pools: UpstreamPool[] = []
const apps: FastifyInstance[] = []

beforeAll(async () => {
  upstream = createServer((req, res) => {
    res.setHeader('content-type', 'text/plain')
    res.setHeader('x-upstream', 'yes')
    // /app/chunked: no declared length, so the body streams.
    if (req.url === '/app/chunked') res.write('hel')
    res.end(req.url === '/app/chunked' ? 'lo' : 'hello')
  })
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
})
afterAll(async () => {
  for (const app of apps) await app.close()
  for (const pool of pools) await pool.destroy()
  upstream.closeAllConnections()
  await new Promise((resolve) => upstream.close(resolve))
})

/** A proxy to `origin` over an UpstreamPool; each onResponse argument as reply-from gave it, and as the adapter read it. */
async function proxyTo (origin: string): Promise<{ app: FastifyInstance, seen: Array<{ raw: ReplyFromResponse, read: UpstreamResponse }>, requests: () => number }> {
  const pool = new UpstreamPool({ origin, timeoutMs: 5000, maxConnections: 2 })
  pools.push(pool)
  let requests = 0
  const request = pool.request.bind(pool)
  pool.request = (options, callback) => {
    requests++
    request(options, callback)
  }
  const seen: Array<{ raw: ReplyFromResponse, read: UpstreamResponse }> = []
  const app = Fastify()
  apps.push(app)
  await app.register(replyFrom, { base: origin, undici: replyFromDispatcher(pool) })
  app.get('/app/*', (request, reply) => reply.from(request.url, {
    onResponse: (_request, reply, raw) => {
      let read: UpstreamResponse
      try {
        read = upstreamResponse(raw)
      } catch (error) {
        // Answered at once: reply-from waits for onResponse to send something.
        reply.code(500).send(String(error))
        return
      }
      seen.push({ raw, read })
      if (read.stream instanceof UpstreamFailure) reply.code(502).send('failed')
      else if (read.stream instanceof WholeBody) read.stream.read((error, body) => { void reply.send(error ?? body) })
      else reply.send(read.stream)
    },
  }))
  return { app, seen, requests: () => requests }
}

describe('reply-from over an UpstreamPool', () => {
  it('sends through the pool and hands onResponse statusCode, headers and a small body read whole', async () => {
    const { app, seen, requests } = await proxyTo(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`)
    const response = await app.inject({ url: '/app/x' })
    expect(response.body).toBe('hello')
    expect(requests()).toBe(1)
    expect(seen).toHaveLength(1)
    const { raw, read } = seen[0]!
    expect(Object.keys(raw).sort()).toEqual(['headers', 'statusCode', 'stream'])
    expect((raw as unknown as { statusCode: number }).statusCode).toBe(200)
    expect(read.headers).toMatchObject({ 'content-type': 'text/plain', 'x-upstream': 'yes' })
    expect(read.stream).toBeInstanceOf(WholeBody)
  })

  it('hands onResponse a stream for a body of no declared length', async () => {
    const { app, seen } = await proxyTo(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`)
    const response = await app.inject({ url: '/app/chunked' })
    expect(response.body).toBe('hello')
    expect(seen[0]!.read.stream).toBeInstanceOf(StreamedBody)
  })

  it('hands onResponse the pool\'s UpstreamFailure as the stream when the upstream cannot be reached', async () => {
    const { app, seen } = await proxyTo(`http://127.0.0.1:${await freePort()}`)
    const response = await app.inject({ url: '/app/x' })
    expect(response.statusCode).toBe(502)
    expect(seen).toHaveLength(1)
    expect(seen[0]!.read.stream).toBeInstanceOf(UpstreamFailure)
    expect((seen[0]!.read.stream as UpstreamFailure).reason.code).toBe('ECONNREFUSED')
  })
})

describe('upstreamResponse', () => {
  it('refuses what is not headers with the pool\'s body or an UpstreamFailure', () => {
    const as = (value: unknown) => value as ReplyFromResponse
    expect(() => upstreamResponse(as({ headers: {}, stream: 'body' }))).toThrow(TypeError)
    expect(() => upstreamResponse(as({ stream: Readable.from([]) }))).toThrow(TypeError)
    expect(() => upstreamResponse(as({ headers: {}, body: Readable.from([]) }))).toThrow(TypeError)
    // Any other stream is not one the pool made.
    expect(() => upstreamResponse(as({ headers: {}, stream: Readable.from([]) }))).toThrow(TypeError)
    const failure = new UpstreamFailure(new Error('x'))
    expect(upstreamResponse(as({ headers: {}, stream: failure })).stream).toBe(failure)
  })
})
