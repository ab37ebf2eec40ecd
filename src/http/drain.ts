// A shutdown that waits only for requests. Fastify's close stops accepting connections and ends the
// keep-alive ones idle at that moment (Node's closeIdleConnections), then waits for every other
// connection to end. Three kinds would hold it to the shutdownTimeout and an exit status of 1 with
// no request in flight: a keep-alive connection whose last request is answered during the shutdown
// (it stays open until the client ends it); a connection that has sent nothing yet, which Node
// counts as a request whose headers are on their way (once the server is closing no timeout of
// Node's ends either: it stops its periodic checks), and browsers open such connections ahead of
// time (preconnect); and a client that sent part of a request's headers and stopped. While the
// gateway closes, each is ended as it comes: the idle ones at once, a silent one once it has read
// no byte at two checks in a row, one still without a whole request after STALLED_MS, each
// looked at again after the event loop has read what had arrived (a request already on its way is
// read, and answered, instead). A connection with a request in flight (its headers read, its answer
// not yet finished) or taken over as a websocket is never ended here: it holds the shutdown to its
// shutdownTimeout.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { FastifyInstance } from 'fastify'

const CHECK_EVERY_MS = 100

/**
 * How long a connection that has sent part of a request's headers may take to finish them once the
 * shutdown has begun, however it trickles them: longer than a round trip on any real link, so that
 * headers split over two flights (a large cookie) still arrive and are answered (503, as any request
 * that comes while the gateway closes).
 */
const STALLED_MS = 1000

/**
 * The last answer begun on each connection. HTTP/1.1 answers a connection's requests in order, so
 * the connection has one under way exactly when its last has not finished. A websocket's upgrade
 * answer never finishes (the route takes the socket over).
 */
const lastAnswer = new WeakMap<Socket | Duplex, ServerResponse>()

/**
 * `response` is under way on `socket` until it has been sent: the shutdown leaves the connection
 * alone. Every request whose headers Node has read ('request'), and every upgrade request, which
 * Node hands to the 'upgrade' listeners instead (http/upgrades.ts).
 */
export function answeringOn (socket: Socket | Duplex, response: ServerResponse): void {
  lastAnswer.set(socket, response)
}

const busy = (socket: Socket) => lastAnswer.get(socket)?.writableFinished === false

export function drainOnClose (app: FastifyInstance): void {
  const open = new Set<Socket>()
  app.server.on('connection', (socket: Socket) => {
    open.add(socket)
    socket.once('close', () => open.delete(socket))
  })
  app.server.on('request', (request: IncomingMessage, response: ServerResponse) => answeringOn(request.socket, response))

  let timer: NodeJS.Timeout | undefined
  app.addHook('preClose', async () => {
    /** How many checks in a row have found each connection without an answer under way. */
    const idleChecks = new WeakMap<Socket, number>()
    timer = setInterval(() => {
      app.server.closeIdleConnections()
      const ending: Array<{ socket: Socket, bytes: number }> = []
      for (const socket of open) {
        if (busy(socket)) { idleChecks.delete(socket); continue }
        const checks = (idleChecks.get(socket) ?? -1) + 1
        idleChecks.set(socket, checks)
        if (checks >= (socket.bytesRead === 0 ? 1 : STALLED_MS / CHECK_EVERY_MS)) ending.push({ socket, bytes: socket.bytesRead })
      }
      // Timers run before the loop reads the sockets: what arrived meanwhile is read before this.
      if (ending.length > 0) {
        // A silent one that has begun a request since is given the time the others had.
        setImmediate(() => { for (const { socket, bytes } of ending) if (!busy(socket) && (bytes !== 0 || socket.bytesRead === 0)) socket.destroy() })
      }
    }, CHECK_EVERY_MS)
    timer.unref()
  })
  app.addHook('onClose', async () => clearInterval(timer))
}
