// A websocket route's upgrades, once the route's hooks have let one through (origin, access, the
// registries of session-sockets.ts and bearer-sockets.ts) and its handshake is one ws accepts
// (proxy/websocket-handshake.ts: else 400 `invalid_request`): the upstream's leg is opened first, with
// the headers the upstream handshake gets (proxy/request-headers.ts) and within the route's
// timeout; only then is the client's upgrade answered 101 and both legs linked
// (proxy/websocket-link.ts). An upstream that is down is answered as HTTP answers it: 502
// `bad_gateway`, 504 `gateway_timeout`, logged with the route (proxy/upstream-response.ts); one the
// gateway's shutdown overtakes while its upstream's leg opens, 503 `shutting_down`.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { IncomingMessage } from 'node:http'
import { WebSocketServer, type WebSocket } from 'ws'
import type { RouteConfig } from '../config/types.js'
import { GatewayError } from '../errors.js'
import { logAbandoned, logUpgrade } from '../http/request-end.js'
import { upgradeOf, type Upgrade } from '../http/upgrades.js'
import type { BearerSockets } from '../proxy/bearer-sockets.js'
import type { UpstreamTarget } from '../proxy/cut-off.js'
import type { UpstreamHeaders } from '../proxy/request-headers.js'
import type { UpstreamPaths } from '../proxy/upstream-path.js'
import type { SessionSockets } from '../proxy/session-sockets.js'
import { upstreamError } from '../proxy/upstream-response.js'
import { CLIENT_GONE_CODE, CLIENT_GONE_REASON, link, openUpstream, UpstreamHandshakeError, type UpstreamLeg } from '../proxy/websocket-link.js'
import { closeLeg, websocketHooks, type WebSocketHooks } from '../proxy/websocket.js'
import { handshakeProblem, offeredProtocols } from '../proxy/websocket-handshake.js'

/** What a websocket route's upgrades need besides the route. */
export interface WebSocketRouteDeps {
  readonly target: UpstreamTarget
  readonly headers: UpstreamHeaders
  /** The route's path as it goes upstream: the same mapping as its HTTP requests. */
  readonly paths: UpstreamPaths
  readonly sockets?: SessionSockets | undefined
  readonly bearerSockets?: BearerSockets | undefined
}

/** The upstream's address of an upgrade: the same path as the route's HTTP requests, the query as the edge made it. */
function upstreamUrl (target: string, paths: UpstreamPaths, origin: URL): URL {
  const queryAt = target.indexOf('?')
  const url = new URL(paths.path(queryAt === -1 ? target : target.slice(0, queryAt)), origin)
  if (queryAt !== -1) url.search = target.slice(queryAt)
  return url
}

/**
 * Watches the client's socket while the upstream's leg opens: a client that leaves (its end of the
 * connection closed, which only reading shows) gives that up. What it sends meanwhile (nothing, if
 * it waits for the 101 as it must) is kept for the upgrade, up to `limit` bytes; more ends it.
 * `head`: stops watching, and returns what ws is to read first.
 */
function watchClient ({ socket, head }: Upgrade, limit: number): { gone: Promise<void>, head: () => Buffer } {
  const early: Buffer[] = [head]
  let size = head.length
  const onData = (chunk: Buffer) => {
    early.push(chunk)
    size += chunk.length
    if (size > limit) socket.destroy()
  }
  socket.on('data', onData)
  socket.resume()
  const gone = new Promise<void>((resolve) => {
    socket.once('end', () => resolve())
    socket.once('close', () => resolve())
  })
  return {
    gone,
    head: () => {
      // ws reads the socket from the same synchronous step on (its 'data' listener): nothing is missed.
      socket.off('data', onData)
      return Buffer.concat(early)
    },
  }
}

/** The gateway's shutdown as the upgrades still opening their upstream's leg see it. */
class Shutdown {
  begun = false
  /** How to give up each upgrade still opening. */
  readonly #opening = new Set<() => void>()

  begin (): void {
    this.begun = true
    for (const giveUp of this.#opening) giveUp()
  }

  /** One upgrade's view: `begun` settles when the shutdown begins; `done` once its leg opened or failed. */
  watch (): { begun: Promise<void>, done: () => void } {
    let giveUp!: () => void
    const begun = new Promise<void>((resolve) => { giveUp = resolve })
    this.#opening.add(giveUp)
    return { begun, done: () => this.#opening.delete(giveUp) }
  }
}

/** The answer to an upgrade the gateway's shutdown overtook: its client tries again, another instance answers. */
function shuttingDown (): GatewayError {
  return new GatewayError('shutting_down', 'The gateway is shutting down.')
}

/**
 * Opens the upstream's leg of an upgrade (websocket-link.ts), given up when the gateway's shutdown
 * begins first (503 shutting_down); undefined when the client left first.
 */
async function upstreamLeg (leg: Omit<UpstreamLeg, 'shutdown'>, shutdown: Shutdown, target: UpstreamTarget, retryUrl: string): Promise<WebSocket | undefined> {
  const opening = shutdown.watch()
  try {
    return await openUpstream({ ...leg, shutdown: opening.begun })
  } catch (error) {
    if (error instanceof UpstreamHandshakeError && error.code === 'WS_CLIENT_GONE') return undefined
    if (error instanceof UpstreamHandshakeError && error.code === 'WS_SHUTDOWN') throw shuttingDown()
    throw upstreamError(target, error as Error, retryUrl)
  } finally {
    opening.done()
  }
}

/** The link's hooks (proxy/websocket.ts): once both legs are open, the registries keep them on a protected route. */
function linkHooks (route: RouteConfig, sockets: SessionSockets | undefined, bearerSockets: BearerSockets | undefined): WebSocketHooks {
  const onOpen = route.auth !== 'required' || (sockets === undefined && bearerSockets === undefined)
    ? undefined
    : (source: WebSocket, upstream: WebSocket) => {
        sockets?.connected(source, upstream)
        bearerSockets?.connected(source, upstream)
      }
  return websocketHooks(route.websocketMaxMessage, onOpen)
}

/**
 * Adds to the route's scope (before the route's proxy handler, which these upgrades reach):
 * a preHandler that takes every websocket upgrade over, and a preClose that closes the open ones
 * and gives up those still opening their upstream's leg.
 */
export function websocketRoute (scope: FastifyInstance, route: RouteConfig, { target, headers, paths, sockets, bearerSockets }: WebSocketRouteDeps): void {
  const upstreamOrigin = new URL(route.upstream)
  upstreamOrigin.protocol = upstreamOrigin.protocol === 'https:' ? 'wss:' : 'ws:'
  /** The sub-protocol each upstream chose, answered to its client. */
  const chosen = new WeakMap<IncomingMessage, string>()
  const server = new WebSocketServer({
    noServer: true,
    maxPayload: route.websocketMaxMessage,
    handleProtocols: (_protocols, request) => chosen.get(request) || false,
  })
  const hooks = linkHooks(route, sockets, bearerSockets)
  const shutdown = new Shutdown()
  // The gateway is closing: its websockets end (their peers reconnect elsewhere), and the server
  // can then close (an upgraded socket would hold it open). An upgrade still waiting for its
  // upstream's handshake is given up and answered 503: linked after this, it would hold the close.
  scope.addHook('preClose', (done) => {
    shutdown.begin()
    // Bounded: a client that never answers (or whose leg is paused) is cut after CLOSE_GRACE_MS.
    for (const client of server.clients) closeLeg(client, CLIENT_GONE_CODE, CLIENT_GONE_REASON)
    done()
  })
  scope.addHook('preHandler', async function (request: FastifyRequest, reply: FastifyReply) {
    const upgrade = upgradeOf(request.raw)
    if (upgrade === undefined) return
    if (shutdown.begun) throw shuttingDown()
    // One ws would refuse after the upstream's leg had opened never reaches the upstream.
    const problem = handshakeProblem(request.raw)
    if (problem !== undefined) throw new GatewayError('invalid_request', problem)
    const url = upstreamUrl(request.url, paths, upstreamOrigin)
    const client = watchClient(upgrade, route.websocketMaxMessage)
    sockets?.handing(request)
    bearerSockets?.handing(request)
    const upstream = await upstreamLeg({
      url,
      // Read by handshakeProblem above: a list ws accepts.
      protocols: offeredProtocols(request.headers['sec-websocket-protocol']) ?? [],
      headers: headers.websocket(route, request),
      maxPayload: route.websocketMaxMessage,
      timeoutMs: route.timeoutMs,
      created: (leg) => {
        sockets?.opening(leg)
        bearerSockets?.opening(leg)
      },
      clientGone: client.gone,
    }, shutdown, target, request.url)
    // A client that left first is owed no answer (its socket is gone), but its line is: the upgrade
    // was let through, and may have reached the upstream with the person's headers (an attacker's
    // finding: no line at all, at any level).
    if (upstream === undefined) {
      reply.hijack()
      upgrade.socket.destroy()
      logAbandoned(request, reply, 'before')
      return
    }
    reply.hijack()
    if (upstream.protocol !== '') chosen.set(request.raw, upstream.protocol)
    let linked = false
    server.handleUpgrade(request.raw, upgrade.socket, client.head(), (source) => {
      linked = true
      logUpgrade(request)
      link(source, upstream, hooks)
    })
    // ws answered the client's handshake itself (400: not a valid websocket handshake), or its socket had gone.
    if (!linked) {
      closeLeg(upstream, CLIENT_GONE_CODE, CLIENT_GONE_REASON)
      logAbandoned(request, reply, 'before')
    }
  })
}
