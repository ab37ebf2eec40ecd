// A TCP proxy on a loopback port that forwards bytes both ways and can hold them back: a slow
// network or a slow Redis, for fault tests. The delay can be changed while connections are open;
// bytes always leave in the order they arrived, so lowering the delay never reorders a stream.
import { createServer, connect, type Server, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'

export interface DelayProxy {
  /** `host:port` to connect to instead of the target. */
  host: string
  port: number
  /** Holds every chunk received from now on for `ms` (in both directions). */
  setDelay (ms: number): void
  /**
   * Once the next chunk from the target is on its way to the client (handed to the kernel, so the
   * client's socket holds it), keeps this process from running anything else for `ms` (a busy
   * loop), as a process starved of the CPU is: its due timers then run before it reads that socket.
   */
  stallAfterNextAnswer (ms: number): void
  close (): Promise<void>
}

/**
 * One direction of one connection: each chunk is due `delay` after it arrived, but never before the
 * chunk ahead of it, so the order is kept when the delay drops.
 */
class DelayedPipe {
  private readonly queue: Array<{ chunk: Buffer, due: number }> = []
  private timer: NodeJS.Timeout | undefined
  private lastDue = 0

  constructor (private readonly to: Socket, private readonly delay: () => number, private readonly written: () => void = () => {}) {}

  push (chunk: Buffer): void {
    const due = Math.max(Date.now() + this.delay(), this.lastDue)
    this.lastDue = due
    this.queue.push({ chunk, due })
    this.pump()
  }

  private pump (): void {
    if (this.timer) return
    while (this.queue.length > 0 && this.queue[0]!.due <= Date.now()) {
      const { chunk } = this.queue.shift()!
      if (!this.to.destroyed) this.to.write(chunk, this.written)
    }
    if (this.queue.length === 0) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      this.pump()
    }, this.queue[0]!.due - Date.now())
  }

  stop (): void {
    clearTimeout(this.timer)
    this.queue.length = 0
  }
}

export async function startDelayProxy (target: { host: string, port: number }): Promise<DelayProxy> {
  let delay = 0
  let stallMs = 0
  const sockets = new Set<Socket>()
  const answered = () => {
    const until = performance.now() + stallMs
    stallMs = 0
    while (performance.now() < until) { /* starved */ }
  }
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, target.host)
    sockets.add(client).add(upstream)
    const toUpstream = new DelayedPipe(upstream, () => delay)
    const toClient = new DelayedPipe(client, () => delay, answered)
    client.on('data', (chunk: Buffer) => toUpstream.push(chunk))
    upstream.on('data', (chunk: Buffer) => toClient.push(chunk))
    const end = () => {
      toUpstream.stop()
      toClient.stop()
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
    }
    client.on('close', end).on('error', end)
    upstream.on('close', end).on('error', end)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    host: '127.0.0.1',
    port,
    setDelay: (ms) => { delay = ms },
    stallAfterNextAnswer: (ms) => { stallMs = ms },
    close: async () => {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
