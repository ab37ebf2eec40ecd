// A shutdown that waits only for requests. Fastify's close stops accepting connections and ends the
// keep-alive ones idle at that moment (Node's closeIdleConnections), then waits for every other
// connection to end. Two kinds would hold it to the shutdownTimeout and an exit status of 1 with
// no request in flight: a keep-alive connection whose last request is answered during the shutdown
// (it stays open until the client ends it), and a connection that has sent nothing yet, which Node
// counts as a request whose headers are on their way (once the server is closing no timeout of
// Node's ends either: it stops its periodic checks). Browsers open such connections ahead of time
// (preconnect). While the gateway closes, both are ended as they come: the idle ones at once, a
// silent one once it has read no byte at two checks in a row, looked at again after the event
// loop has read what had arrived (a request already on its way is read, and answered, instead).
// Not ended: a client that sent part of a request's headers and stalled; it holds the shutdown to
// its shutdownTimeout, as a request in flight does.
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'

const CHECK_EVERY_MS = 100

export function drainOnClose (app: FastifyInstance): void {
  const open = new Set<Socket>()
  app.server.on('connection', (socket: Socket) => {
    open.add(socket)
    socket.once('close', () => open.delete(socket))
  })
  let timer: NodeJS.Timeout | undefined
  app.addHook('preClose', async () => {
    const silentAtLastCheck = new WeakSet<Socket>()
    timer = setInterval(() => {
      app.server.closeIdleConnections()
      const silent: Socket[] = []
      for (const socket of open) {
        if (socket.bytesRead !== 0) continue
        if (silentAtLastCheck.has(socket)) silent.push(socket)
        else silentAtLastCheck.add(socket)
      }
      // Timers run before the loop reads the sockets: what arrived meanwhile is read before this.
      if (silent.length > 0) setImmediate(() => { for (const socket of silent) if (socket.bytesRead === 0) socket.destroy() })
    }, CHECK_EVERY_MS)
    timer.unref()
  })
  app.addHook('onClose', async () => clearInterval(timer))
}
