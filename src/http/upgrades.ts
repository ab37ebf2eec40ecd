// Upgrade requests. Node hands every request with an Upgrade header to the server's 'upgrade'
// listeners, outside the HTTP server's own answering and timeouts. A websocket upgrade to a
// websocket route goes through Fastify's routing with its socket kept (upgradeOf), so that the
// route's hooks judge it and then either take the socket over (routes/websocket-route.ts, once the
// upstream's leg is open) or answer it as HTTP (401, 403, 502, 503, 504) on that socket. Every other
// upgrade request is answered as the ordinary HTTP request it also is (the Upgrade header is
// hop-by-hop and never forwarded). Either way the socket is closed after an HTTP answer.
import { ServerResponse, type IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import type { RouteConfig } from '../config/types.js'
import { canonicalTarget, requestSpelling } from '../config/canonical.js'
import { answeringOn } from './drain.js'
import { rejectMalformed } from './edge.js'

/** An upgrade request's socket and the bytes read past its headers. */
export interface Upgrade {
  readonly socket: Duplex
  readonly head: Buffer
}

const upgrades = new WeakMap<IncomingMessage, Upgrade>()

/** The socket of a websocket upgrade to a websocket route; undefined for any other request. */
export function upgradeOf (request: IncomingMessage): Upgrade | undefined {
  return upgrades.get(request)
}

/** True when `path` (canonical) is under one of the route prefixes. */
function underAny (path: string, prefixes: string[]): boolean {
  return prefixes.some((prefix) => prefix === '/' || path === prefix || path.startsWith(`${prefix}/`))
}

/**
 * Routes an upgrade request through Fastify on its socket, which is closed after an HTTP answer;
 * `websocket`: kept for the route's hooks to take over (upgradeOf).
 */
function route (app: FastifyInstance, request: IncomingMessage, socket: Duplex, head: Buffer, websocket: boolean): void {
  socket.on('error', () => socket.destroy())
  // Node stops parsing at an upgrade request's headers: a body it declares would never arrive.
  const length = request.headers['content-length']
  if ((length !== undefined && length !== '0') || request.headers['transfer-encoding'] !== undefined) {
    rejectMalformed(request, 'an upgrade request may not carry a body')
  }
  if (websocket) upgrades.set(request, { socket, head })
  const response = new ServerResponse(request)
  response.shouldKeepAlive = false
  response.assignSocket(socket as Parameters<ServerResponse['assignSocket']>[0])
  response.on('finish', () => socket.destroy())
  answeringOn(socket, response)
  app.routing(request, response)
}

/**
 * Answers every upgrade request (call once every route is registered): websocket upgrades under a
 * websocket route are kept for that route to take over, the rest are answered as HTTP.
 */
export function guardUpgrades (app: FastifyInstance, routes: RouteConfig[]): void {
  // In the request's spelling, as the paths they are compared with: `/café` is `/caf%C3%A9`.
  const websocketPrefixes = routes.filter((route) => route.websocket).map((route) => requestSpelling(route.path))
  app.server.removeAllListeners('upgrade')
  app.server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    const target = canonicalTarget(request.url ?? '')
    const path = target.ok ? target.url.split('?', 1)[0]! : undefined
    const websocket = request.headers.upgrade?.toLowerCase() === 'websocket'
    route(app, request, socket, head, websocket && path !== undefined && underAny(path, websocketPrefixes))
  })
}
