// A shutdown that waits only for requests. Fastify's close stops accepting connections and ends the
// keep-alive ones idle at that moment (Node's closeIdleConnections), then waits for every other
// connection to end. Two kinds would hold it to the shutdownTimeout and an exit status of 1 with
// no request in flight: a keep-alive connection whose last request is answered during the shutdown
// (it stays open until the client or keepAliveTimeout ends it), and a connection that has sent
// nothing yet, which Node counts as a request whose headers are on their way and keeps until its
// headersTimeout (60 s). Browsers open such connections ahead of time (preconnect). While the
// gateway closes, both are ended as they come: the idle ones at once, a silent one once it has
// stayed silent for a whole check (a request already on its way is read before then).
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
      for (const socket of open) {
        if (socket.bytesRead !== 0) continue
        if (silentAtLastCheck.has(socket)) socket.destroy()
        else silentAtLastCheck.add(socket)
      }
    }, CHECK_EVERY_MS)
    timer.unref()
  })
  app.addHook('onClose', async () => clearInterval(timer))
}
