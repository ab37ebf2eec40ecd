// WebSocket routes (websocket: true): the upgrade passes the same auth gate, and the upstream
// handshake carries the bearer token (and never the gateway's cookies); a message larger than
// websocketMaxMessage, either way, closes both sockets with 1009; a peer that does not read makes
// the gateway stop reading the other side instead of keeping what it sends, and the client's upgrade
// is answered only once the upstream's is. Real sockets, `ws` upstream.
import { readFileSync } from 'node:fs'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { Duplex } from 'node:stream'
import { WebSocket, WebSocketServer } from 'ws'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { websocketHighWater } from '../../src/proxy/websocket.js'
import { Browser } from '../helpers/browser.js'
import { startGatewayWithProvider, type TestGateway } from '../helpers/gateway.js'
import { ONE_ANSWER_MS } from '../helpers/bounds.js'
import { close, listen, waitFor } from '../helpers/net.js'
import type { TestProvider } from '../helpers/oidc.js'
import { startRedis, type TestRedis } from '../helpers/redis.js'

let redis: TestRedis
let op: TestProvider
let stack: Awaited<ReturnType<typeof startGatewayWithProvider>>
let gateway: TestGateway
let wsUpstream: string
const upstreamServer = createServer((_req, res) => res.end('plain HTTP ok'))
/** An upstream whose handshake waits for `releaseSlow` (the gateway's upstream leg stays connecting). */
const slowServer = createServer()
/** The slow upstream's raw sockets: one never released (/stuck/) is ended by the test, not by the server's close. */
const slowSockets = new Set<Duplex>()
/** The /stuck/ route's timeout: what its upstream handshake may take. */
const STUCK_TIMEOUT_MS = 500
let releaseSlow: () => void = () => {}
let slowAsked: Promise<void> = Promise.resolve()
/** The upstream sockets of /mirror (echo as is) and /sink (paused: reads nothing until resumed), newest last. */
const mirrors: WebSocket[] = []
/** What each upstream socket of /mirror, /sink and the slow upstream received, by socket. */
const received = new Map<WebSocket, Buffer[]>()
/** Sockets of the test itself (clients and upstreams): every other WebSocket is one of the gateway's legs. */
const ours = new WeakSet<WebSocket>()
const handshakes: IncomingHttpHeaders[] = []
/** How each upstream socket closed, in the order they opened. */
const upstreamClosed: Array<Promise<number>> = []

beforeAll(async () => {
  redis = await startRedis()
  // Echo upstream: answers each message with the message (its length only past 1000 bytes) and the
  // Authorization of its handshake; `send:N` makes it send a message of N bytes.
  const wss = new WebSocketServer({ server: upstreamServer })
  wss.on('connection', (socket, request) => {
    ours.add(socket)
    handshakes.push(request.headers)
    upstreamClosed.push(new Promise((resolve) => socket.once('close', resolve)))
    if (request.url === '/mirror' || request.url === '/sink') {
      mirrors.push(socket)
      received.set(socket, [])
      if (request.url === '/sink') socket.pause()
      socket.on('message', (data, binary) => {
        received.get(socket)!.push(data as Buffer)
        if (request.url === '/mirror') socket.send(data, { binary })
      })
      return
    }
    socket.on('message', (raw) => {
      const data = raw as Buffer
      const order = /^send:(\d+)$/.exec(data.toString('latin1', 0, 20))
      if (order) {
        socket.send(Buffer.alloc(Number(order[1]), 'x'))
        return
      }
      socket.send(JSON.stringify({ echo: data.length <= 1000 ? data.toString() : undefined, length: data.length, authorization: request.headers.authorization, path: request.url }))
    })
  })
  wsUpstream = await listen(upstreamServer)
  let announceSlow: () => void = () => {}
  slowAsked = new Promise((resolve) => { announceSlow = resolve })
  const slowWss = new WebSocketServer({ noServer: true })
  slowServer.on('upgrade', (request, socket, head) => {
    slowSockets.add(socket)
    const released = new Promise<void>((resolve) => { releaseSlow = resolve })
    void released.then(() => slowWss.handleUpgrade(request, socket, head, (upstream) => {
      ours.add(upstream)
      mirrors.push(upstream)
      received.set(upstream, [])
      upstream.on('message', (data) => received.get(upstream)!.push(data as Buffer))
    }))
    announceSlow()
  })
  const slowUpstream = await listen(slowServer)
  stack = await startGatewayWithProvider({
    store: { type: 'redis', url: redis.url },
    routes: [
      { path: '/live/', upstream: wsUpstream, provider: 'demo', websocket: true, rewritePrefix: '/', allowedOrigins: ['https://app.example.com'] },
      { path: '/small/', upstream: wsUpstream, provider: 'demo', websocket: true, rewritePrefix: '/', websocketMaxMessage: '1KiB' },
      { path: '/flood/', upstream: wsUpstream, provider: 'demo', websocket: true, rewritePrefix: '/', websocketMaxMessage: '64KiB' },
      { path: '/slow/', upstream: slowUpstream, provider: 'demo', websocket: true, rewritePrefix: '/', websocketMaxMessage: '64KiB' },
      // The same upstream, whose handshake is never released for this route's requests, with a short timeout.
      { path: '/stuck/', upstream: slowUpstream, provider: 'demo', websocket: true, rewritePrefix: '/', timeout: `${STUCK_TIMEOUT_MS}ms` },
    ],
  })
  ;({ gateway, op } = stack)
})

afterAll(async () => {
  await stack?.close()
  await close(upstreamServer)
  slowServer.closeAllConnections()
  for (const socket of slowSockets) socket.destroy()
  await close(slowServer)
  await redis?.release()
})

/** Opens /live/feed as a page of `origin` would (the gateway's own by default; null: no Origin). */
function connect (cookie?: string, origin: string | null = gateway.url, path = '/live/feed'): Promise<WebSocket> {
  const headers: Record<string, string> = { ...(cookie ? { cookie } : {}), ...(origin ? { origin } : {}) }
  const socket = new WebSocket(`${gateway.url.replace('http', 'ws')}${path}`, { headers })
  ours.add(socket)
  return new Promise((resolve, reject) => {
    socket.once('open', () => resolve(socket))
    socket.once('unexpected-response', (_req, res) => reject(new Error(`handshake answered ${res.statusCode}`)))
    socket.once('error', reject)
  })
}

describe('websocket: true', () => {
  it('round-trips a message to the upstream with the bearer injected', async () => {
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/live/`)
    const cookie = `gw_session=${browser.cookies.get('gw_session')!.value}; other=1`
    const socket = await connect(cookie)
    const reply = new Promise<string>((resolve) => socket.once('message', (data) => resolve(data.toString())))
    socket.send('hello')
    const answer = JSON.parse(await reply) as { echo: string, authorization: string, path: string }
    socket.close()
    expect(answer.echo).toBe('hello')
    expect(answer.path).toBe('/feed')
    expect(answer.authorization).toMatch(/^Bearer \S+$/)
    expect((await fetch(`${op.issuer}/me`, { headers: { authorization: answer.authorization } })).status).toBe(200)
    const handshake = handshakes.at(-1)!
    expect(handshake.cookie).toBe('other=1')
    expect(handshake['x-forwarded-for']).toBe('127.0.0.1')
    expect(handshake.origin).toBe(gateway.url)
  })

  it.each([
    ['another site', 'https://evil.example'],
    ['a look-alike of the gateway', gateway?.url.replace('127.0.0.1', '127.0.0.1.evil.example') ?? 'http://127.0.0.1.evil.example'],
    ['no Origin at all', null],
  ])('refuses an upgrade from %s with 403 forbidden, even signed in', async (_name, origin) => {
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/live/`)
    const before = handshakes.length
    const logged = gateway.logs.length
    await expect(connect(`gw_session=${browser.cookies.get('gw_session')!.value}`, origin)).rejects.toThrow('handshake answered 403')
    expect(handshakes.length).toBe(before)
    // Its line says the refusal, though no one was judged yet (an attacker's finding: no decision at all).
    const line = gateway.logs.slice(logged).map((text) => JSON.parse(text) as Record<string, unknown>).find((entry) => entry.url === '/live/feed' && entry.statusCode === 403)
    expect(line).toMatchObject({ decision: 'forbidden', reason: 'origin', user: null, rule: 'none', credential: null })
  })

  it('accepts an upgrade from an origin in allowedOrigins and forwards that Origin', async () => {
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/live/`)
    const before = handshakes.length
    const socket = await connect(`gw_session=${browser.cookies.get('gw_session')!.value}`, 'https://app.example.com')
    // The gateway opens the upstream's socket before it answers the client's upgrade.
    expect(handshakes.length).toBeGreaterThan(before)
    socket.close()
    expect(handshakes.at(-1)!.origin).toBe('https://app.example.com')
  })

  it('refuses the upgrade with 401 without a session, and the upstream never sees it', async () => {
    const before = handshakes.length
    await expect(connect()).rejects.toThrow('handshake answered 401')
    expect(handshakes.length).toBe(before)
  })
})

describe('websocketMaxMessage bounds each message, both ways', () => {
  const MiB = 1024 * 1024

  /** A signed-in client socket on `path`, and the upstream socket the gateway opened for it. */
  async function open (path: string): Promise<{ socket: WebSocket, upstream: Promise<number> }> {
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/live/`)
    const before = upstreamClosed.length
    const socket = await connect(`gw_session=${browser.cookies.get('gw_session')!.value}`, gateway.url, path)
    await waitFor(async () => upstreamClosed.length > before, 5000, 'the upstream socket')
    return { socket, upstream: upstreamClosed[before]! }
  }

  const closed = (socket: WebSocket) => new Promise<number>((resolve) => socket.once('close', resolve))
  const next = (socket: WebSocket) => new Promise<Buffer>((resolve) => socket.once('message', (data) => resolve(data as Buffer)))

  it.each([
    ['the default (1 MiB)', '/live/feed', MiB],
    ['websocketMaxMessage: 1KiB', '/small/feed', 1024],
  ])('%s: a message of exactly the limit reaches the upstream; one byte more closes both sockets with 1009', async (_name, path, limit) => {
    const { socket, upstream } = await open(path)
    const answer = next(socket)
    socket.send(Buffer.alloc(limit, 'a'))
    expect(JSON.parse((await answer).toString())).toMatchObject({ length: limit })

    const clientClosed = closed(socket)
    socket.send(Buffer.alloc(limit + 1, 'a'))
    expect(await clientClosed).toBe(1009)
    expect(await upstream).toBe(1009)
  })

  it.each([
    ['the default (1 MiB)', '/live/feed', MiB],
    ['websocketMaxMessage: 1KiB', '/small/feed', 1024],
  ])('%s: the upstream\'s message of exactly the limit reaches the client; one byte more closes both sockets with 1009', async (_name, path, limit) => {
    const { socket, upstream } = await open(path)
    const message = next(socket)
    socket.send(`send:${limit}`)
    expect((await message).length).toBe(limit)

    const clientClosed = closed(socket)
    socket.send(`send:${limit + 1}`)
    expect(await clientClosed).toBe(1009)
    expect(await upstream).toBe(1009)
  })
})

describe('the bytes waiting on each leg are bounded (backpressure)', () => {
  const KiB = 1024
  const limit = 64 * KiB
  /** What one gateway leg may hold unsent: the high-water mark, one message, one socket read. */
  const bound = websocketHighWater(limit) + limit + 64 * KiB
  /** "Many times the bound": what a reading peer is sent, for the bound to hold over all of it. */
  const many = 8 * bound
  /**
   * The most a non-reading peer is sent: past what the kernel's TCP buffers can hold on the way to
   * it (its receive buffer and the gateway's send buffer, each as large as autotuning may grow it:
   * the largest of net.ipv4.tcp_rmem and tcp_wmem), twice over, in whole MiB; otherwise the kernel
   * could take everything and the gateway never have to stop reading (on this machine tcp_rmem
   * grows to 32 MiB). It is sent a round at a time, and only until the gateway has stopped reading
   * (`untilPaused`): what the kernel really took, a few MiB, not what it might.
   */
  const total = (() => {
    const largest = (name: string) => Number(readFileSync(`/proc/sys/net/ipv4/${name}`, 'utf8').trim().split(/\s+/).at(-1))
    return Math.ceil(2 * (largest('tcp_rmem') + largest('tcp_wmem')) / (1024 * KiB)) * 1024 * KiB
  })()
  const ROUND = 1024 * KiB

  /** The most any gateway leg had unsent right after a send, and how many times one paused. */
  let peak = 0
  let pauses = 0
  const { send, pause, ping, pong } = WebSocket.prototype
  beforeAll(() => {
    vi.spyOn(WebSocket.prototype, 'send').mockImplementation(function (this: WebSocket, ...args: Parameters<WebSocket['send']>) {
      send.apply(this, args)
      if (!ours.has(this)) peak = Math.max(peak, this.bufferedAmount)
    })
    for (const [name, original] of [['ping', ping], ['pong', pong]] as const) {
      vi.spyOn(WebSocket.prototype, name).mockImplementation(function (this: WebSocket, ...args: Parameters<WebSocket['ping']>) {
        original.apply(this, args)
        if (!ours.has(this)) peak = Math.max(peak, this.bufferedAmount)
      })
    }
    vi.spyOn(WebSocket.prototype, 'pause').mockImplementation(function (this: WebSocket) {
      if (!ours.has(this)) pauses++
      pause.call(this)
    })
  })
  afterAll(() => { vi.restoreAllMocks() })

  /** `bytes` as messages of `size` bytes, each starting with its index, the first `from`. */
  function messages (size: number, bytes: number, from = 0): Buffer[] {
    return Array.from({ length: bytes / size }, (_, index) => {
      const message = Buffer.alloc(size, 'm')
      message.writeUInt32BE(from + index)
      return message
    })
  }

  /**
   * Sends `socket` rounds of messages of `size` (pushed onto `sent`), each once `delivered(sent)`
   * says the last is through, until `stopped()`: the gateway has stopped reading and the bytes it
   * did not read wait in the peer. At most `total` bytes: past it, the test's expectations fail.
   */
  async function untilPaused (socket: WebSocket, size: number, sent: Buffer[], delivered: () => Promise<boolean>, stopped: () => boolean): Promise<void> {
    while (!stopped() && sent.length * size < total) {
      for (const message of messages(size, ROUND, sent.length)) {
        socket.send(message)
        sent.push(message)
      }
      await waitFor(delivered, 20_000, 'the round through the gateway, or the gateway to stop reading')
    }
  }

  async function signedIn (path: string): Promise<WebSocket> {
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/flood/`)
    return connect(`gw_session=${browser.cookies.get('gw_session')!.value}`, gateway.url, path)
  }

  /** Resolves with the first `count` messages `socket` receives. */
  function collect (socket: WebSocket, count: number): Promise<Buffer[]> {
    const got: Buffer[] = []
    return new Promise((resolve) => socket.on('message', (data) => { if (got.push(data as Buffer) === count) resolve(got) }))
  }

  const indexes = (list: Buffer[]) => list.map((message) => message.readUInt32BE(0))

  it.each([
    ['messages of the limit', limit],
    ['messages of 4 KiB', 4 * KiB],
  ])('a client that never reads while the upstream echoes (%s): the gateway stops reading the upstream, then delivers everything in order', async (_name, size) => {
    peak = 0
    pauses = 0
    const before = mirrors.length
    const socket = await signedIn('/flood/mirror')
    await waitFor(async () => mirrors.length > before, 5000, 'the upstream socket')
    const upstream = mirrors[before]!
    // Counted from here: the gateway pauses the upstream's leg while it answers the client's upgrade.
    pauses = 0
    socket.pause()
    const sent: Buffer[] = []
    await untilPaused(socket, size, sent, async () => received.get(upstream)!.length === sent.length, () => pauses > 0 && upstream.bufferedAmount > 0)

    expect(peak).toBeLessThanOrEqual(bound)
    expect(pauses).toBeGreaterThan(0)
    // The echoes the gateway did not read wait in the upstream, not in the gateway.
    expect(upstream.bufferedAmount).toBeGreaterThan(0)

    const echoes = collect(socket, sent.length)
    socket.resume()
    expect(indexes(await echoes)).toEqual(indexes(sent))
    expect(peak).toBeLessThanOrEqual(bound)
    socket.close()
  })

  it('an upstream that never reads: the gateway stops reading the client, and delivers everything once the upstream reads', async () => {
    peak = 0
    pauses = 0
    const before = mirrors.length
    const socket = await signedIn('/flood/sink')
    await waitFor(async () => mirrors.length > before, 5000, 'the upstream socket')
    const upstream = mirrors[before]!
    pauses = 0
    const sent: Buffer[] = []
    // Without backpressure the gateway reads all of it; with it, reading the client pauses.
    await untilPaused(socket, limit, sent, async () => pauses > 0 || socket.bufferedAmount === 0, () => pauses > 0 && socket.bufferedAmount > 0)
    expect(peak).toBeLessThanOrEqual(bound)
    expect(socket.bufferedAmount).toBeGreaterThan(0)

    upstream.resume()
    await waitFor(async () => received.get(upstream)!.length === sent.length, 20_000, 'every message at the upstream')
    expect(indexes(received.get(upstream)!)).toEqual(indexes(sent))
    expect(peak).toBeLessThanOrEqual(bound)
    socket.close()
  })

  it.each(['pong', 'ping'] as const)('an upstream that never reads and a client flooding it with %ss: the gateway holds no more than for messages', async (kind) => {
    peak = 0
    const before = mirrors.length
    const socket = await signedIn('/flood/sink')
    await waitFor(async () => mirrors.length > before, 5000, 'the upstream socket')
    pauses = 0
    // The largest a control frame may carry (RFC 6455 §5.5); unsolicited pongs need no answer.
    const frame = Buffer.alloc(125, 'p')
    // The gateway stopped reading the client, or (pings: ws answers each itself, and ends a
    // connection whose answers pile up) ended it.
    const held = () => (pauses > 0 && socket.bufferedAmount > 0) || socket.readyState !== WebSocket.OPEN
    for (let sent = 0; sent < total && !held(); sent += ROUND) {
      for (let i = 0; i < ROUND / frame.length; i++) socket[kind](frame)
      await waitFor(async () => held() || socket.bufferedAmount === 0, 20_000, 'the round through the gateway, or the gateway to stop reading')
    }
    expect(peak).toBeLessThanOrEqual(bound)
    expect(held()).toBe(true)
    socket.close()
    // The upstream reads again: the closing handshake can go through (as in the messages' case).
    mirrors[before]!.resume()
  })

  it('an upstream still connecting: the client\'s upgrade is answered only once the upstream\'s is, so nothing the client sends waits in the gateway', async () => {
    peak = 0
    const before = mirrors.length
    let opened = false
    const connecting = signedIn('/slow/feed').then((socket) => {
      opened = true
      return socket
    })
    await slowAsked
    // The upstream has the handshake and has not answered it: the client's upgrade waits too.
    await new Promise((resolve) => setImmediate(resolve))
    expect(opened).toBe(false)

    releaseSlow()
    const socket = await connecting
    expect(mirrors.length).toBeGreaterThan(before)
    const upstream = mirrors[before]!
    const sent = messages(limit, many)
    for (const message of sent) socket.send(message)
    await waitFor(async () => received.get(upstream)!.length === sent.length, 20_000, 'every message at the upstream')
    expect(indexes(received.get(upstream)!)).toEqual(indexes(sent))
    expect(peak).toBeLessThanOrEqual(bound)
    socket.close()
  })

  it('a client that reads as it goes exchanges many times the bound, in order', async () => {
    peak = 0
    const socket = await signedIn('/flood/mirror')
    const sent = messages(limit, many)
    const echoes = collect(socket, sent.length)
    for (const message of sent) socket.send(message)
    expect(indexes(await echoes)).toEqual(indexes(sent))
    expect(peak).toBeLessThanOrEqual(bound)
    socket.close()
  })
})

describe('an upstream that never answers the websocket handshake', () => {
  it('gets no longer than the route\'s timeout: the client\'s upgrade is answered 504, never 101', async () => {
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/flood/`)
    const started = performance.now()
    await expect(connect(`gw_session=${browser.cookies.get('gw_session')!.value}`, gateway.url, '/stuck/never')).rejects.toThrow('handshake answered 504')
    // Never before the timeout (the wait is the route's).
    expect(performance.now() - started).toBeGreaterThanOrEqual(STUCK_TIMEOUT_MS * 0.9)
  })

  // The upgrade was let through and its handshake, with the person's headers, is at the upstream:
  // the client leaving first ends it, and its line says so, with whom it was let through for (an
  // attacker's finding: no line at all, at any level).
  it('a client that leaves while the upstream has its handshake: one line, abandoned (499), with the audit fields', async () => {
    const browser = new Browser()
    await browser.navigate(`${gateway.url}/flood/`, { login: 'carol' })
    const asked = slowSockets.size
    const logged = gateway.logs.length
    const socket = new WebSocket(`${gateway.url.replace('http', 'ws')}/stuck/gone`, { headers: { cookie: `gw_session=${browser.cookies.get('gw_session')!.value}`, origin: gateway.url } })
    ours.add(socket)
    socket.on('error', () => {})
    await waitFor(async () => slowSockets.size > asked, ONE_ANSWER_MS, 'the upstream has the handshake')
    socket.terminate()
    // Within one answer, longer than the route's timeout: had the gateway not seen the client leave, its 504 line would be there by then.
    const lines = () => gateway.logs.slice(logged).map((text) => JSON.parse(text) as Record<string, unknown>).filter((line) => line.url === '/stuck/gone' && line.statusCode !== undefined)
    expect(STUCK_TIMEOUT_MS).toBeLessThan(ONE_ANSWER_MS)
    await waitFor(async () => lines().length > 0, ONE_ANSWER_MS, 'the upgrade\'s line')
    expect(lines()).toEqual([expect.objectContaining({ msg: 'request abandoned: the client went away before the answer', statusCode: 499, decision: 'allow', user: 'carol', credential: 'session' })])
  })
})
