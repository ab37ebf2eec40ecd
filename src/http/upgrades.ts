// Upgrade requests. Node hands every request with an Upgrade header to the server's 'upgrade'
// listeners, outside the HTTP server's own answering and timeouts; @fastify/http-proxy's listener
// then marks each one as a websocket, and on a route without `websocket: true` nothing ever
// answers it: the socket stays open for good. Only a websocket upgrade to a websocket route goes
// to that listener here; every other upgrade request is answered as the ordinary HTTP request it
// also is (the Upgrade header is hop-by-hop and never forwarded), and its socket is closed after.
import { ServerResponse, type IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import type { RouteConfig } from '../config/types.js'
import { canonicalTarget } from '../config/canonical.js'
import { refuseAtEdge } from './edge.js'

type UpgradeListener = (request: IncomingMessage, socket: Duplex, head: Buffer) => void

/** True when `path` (canonical) is under one of the route prefixes. */
function underAny (path: string, prefixes: string[]): boolean {
  return prefixes.some((prefix) => prefix === '/' || path === prefix || path.startsWith(`${prefix}/`))
}

/** Answers an upgrade request through Fastify as plain HTTP, then closes its socket. */
function answerAsHttp (app: FastifyInstance, request: IncomingMessage, socket: Duplex): void {
  socket.on('error', () => socket.destroy())
  // Node stops parsing at an upgrade request's headers: a body it declares would never arrive.
  const length = request.headers['content-length']
  if ((length !== undefined && length !== '0') || request.headers['transfer-encoding'] !== undefined) {
    refuseAtEdge(request, 'an upgrade request may not carry a body')
  }
  const response = new ServerResponse(request)
  response.shouldKeepAlive = false
  response.assignSocket(socket as Parameters<ServerResponse['assignSocket']>[0])
  response.on('finish', () => socket.destroy())
  app.routing(request, response)
}

/**
 * Puts the gateway's dispatcher in front of the 'upgrade' listeners registered so far (call once
 * every route is registered): websocket upgrades under a websocket route go to them, the rest are
 * answered as HTTP.
 */
export function guardUpgrades (app: FastifyInstance, routes: RouteConfig[]): void {
  const websocketPrefixes = routes.filter((route) => route.websocket).map((route) => route.path)
  const proxies = app.server.listeners('upgrade') as UpgradeListener[]
  app.server.removeAllListeners('upgrade')
  app.server.on('upgrade', (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    const target = canonicalTarget(request.url ?? '')
    const path = target.ok ? target.url.split('?', 1)[0]! : undefined
    const websocket = request.headers.upgrade?.toLowerCase() === 'websocket'
    if (websocket && path !== undefined && underAny(path, websocketPrefixes)) {
      for (const proxy of proxies) proxy(request, socket, head)
      return
    }
    answerAsHttp(app, request, socket)
  })
}
