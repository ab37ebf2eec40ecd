// An https upstream's certificate is verified: one the gateway does not trust (here self-signed)
// gets 502 bad_gateway, and the request, with the bearer token a protected route would add, never
// reaches it. (@fastify/reply-from's own pool skips verification unless told otherwise.)
import { createServer, type Server } from 'node:https'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startGateway, type TestGateway } from '../helpers/gateway.js'
import { TEST_CERT as CERT, TEST_KEY as KEY } from '../helpers/tls-cert.js'

describe('upstream TLS', () => {
  let upstream: Server
  let upstreamUrl: string
  let received = 0
  let gateway: TestGateway

  beforeAll(async () => {
    upstream = createServer({ key: KEY, cert: CERT }, (_req, res) => {
      received++
      res.end('served')
    })
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    upstreamUrl = `https://127.0.0.1:${(upstream.address() as AddressInfo).port}`
    gateway = await startGateway({ routes: [{ path: '/app/', upstream: upstreamUrl, auth: 'none' }] })
  })

  afterAll(async () => {
    await gateway?.close()
    upstream?.closeAllConnections()
    await new Promise<void>((resolve) => upstream?.close(() => resolve()))
  })

  it('refuses an upstream certificate it does not trust with 502 bad_gateway, sending it nothing', async () => {
    const response = await fetch(`${gateway.url}/app/x`)
    expect(response.status).toBe(502)
    expect((await response.json() as { error: string }).error).toBe('bad_gateway')
    expect(received).toBe(0)
    const failure = gateway.logs.map((line) => JSON.parse(line) as Record<string, unknown>).find((line) => line.msg === 'upstream failed')
    expect(failure).toMatchObject({ level: 40, route: '/app', upstream: upstreamUrl, errno: 'DEPTH_ZERO_SELF_SIGNED_CERT' })
  })
})
