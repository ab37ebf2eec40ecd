// A TCP proxy in front of Redis for one gateway instance, to hold its commands from a known point
// on, deterministically: once a chunk containing every string of `after` has passed on a connection,
// the first chunk on that connection containing every string of `hold`, and all that follows it
// there, wait until `release()`. Order is kept. (Written by an outside tester, round 4.) Or, with
// armReplies, the command runs and its reply is late: a chunk containing every string of `on` passes,
// and every reply on that connection from then on waits until `release()` (a slow link: Redis did
// the command, the gateway heard nothing within store.timeout).
import { createServer, connect, type Socket } from 'node:net'
import type { AddressInfo } from 'node:net'
import { startGateway, type TestGateway } from './gateway.js'
import type { GatewayDeps } from '../../src/gateway.js'

export interface HoldProxy {
  port: number
  /** The Redis URL it was started for, through the proxy. */
  url: string
  /** Arms the hold: after a chunk containing `after`, hold from the first chunk containing `hold`. */
  arm (after: string[], hold: string[]): Promise<void>
  /** Arms a hold of replies: the chunk containing `on` runs, the replies from then on wait. */
  armReplies (on: string[]): Promise<void>
  release (): void
  /** Takes back an arming that was never met (the command it waits for did not come). */
  disarm (): void
  /** `act`'s answer, its store replies held from the first chunk holding every string of `on` (if one comes) until it has answered, then let go. */
  lateFrom (on: string[], act: () => Promise<Response>): Promise<Response>
  close (): Promise<void>
}

/** A proxy in front of the Redis at `redisUrl`. */
export async function startHoldProxy (redisUrl: string): Promise<HoldProxy> {
  const target = { host: new URL(redisUrl).hostname, port: Number(new URL(redisUrl).port) }
  let armed: { after: string[], hold: string[], held: () => void } | undefined
  let armedReplies: { on: string[], held: () => void } | undefined
  /** Counts arm() calls: `after` must be seen again after each one. */
  let arming = 0
  const has = (text: string, all: string[]) => all.every((part) => text.includes(part.toLowerCase()))
  const releases: Array<() => void> = []
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    const upstream = connect(target.port, target.host)
    sockets.add(client).add(upstream)
    let seenAfter = -1
    let holding = false
    const queue: Buffer[] = []
    let holdingReplies = false
    const replies: Buffer[] = []
    client.on('data', (chunk: Buffer) => {
      if (holding) { queue.push(chunk); return }
      const text = chunk.toString('latin1').toLowerCase()
      if (armedReplies && has(text, armedReplies.on)) {
        holdingReplies = true
        const { held } = armedReplies
        armedReplies = undefined
        releases.push(() => { holdingReplies = false; for (const c of replies.splice(0)) client.write(c) })
        held()
      }
      if (armed && seenAfter === arming && has(text, armed.hold)) {
        holding = true
        queue.push(chunk)
        const { held } = armed
        armed = undefined
        releases.push(() => { holding = false; for (const c of queue.splice(0)) upstream.write(c) })
        held()
        return
      }
      if (armed && has(text, armed.after)) seenAfter = arming
      upstream.write(chunk)
    })
    upstream.on('data', (chunk: Buffer) => {
      if (holdingReplies) replies.push(chunk)
      else client.write(chunk)
    })
    const end = () => { client.destroy(); upstream.destroy(); sockets.delete(client); sockets.delete(upstream) }
    client.on('error', end).on('close', end)
    upstream.on('error', end).on('close', end)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    url: viaProxy(redisUrl, (server.address() as AddressInfo).port),
    arm: (after, hold) => new Promise<void>((resolve) => {
      arming++
      armed = { after, hold, held: resolve }
    }),
    armReplies: (on) => new Promise<void>((resolve) => { armedReplies = { on, held: resolve } }),
    release: () => { for (const r of releases.splice(0)) r() },
    disarm: () => { armed = undefined; armedReplies = undefined },
    lateFrom: async (on, act) => {
      void new Promise<void>((resolve) => { armedReplies = { on, held: resolve } })
      const answer = await act()
      await answer.arrayBuffer()
      armed = undefined
      armedReplies = undefined
      for (const r of releases.splice(0)) r()
      return answer
    },
    close: async () => {
      for (const r of releases.splice(0)) r()
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** `redisUrl` with its host and port those of the proxy on 127.0.0.1:`port`. */
function viaProxy (redisUrl: string, port: number): string {
  const url = new URL(redisUrl)
  url.hostname = '127.0.0.1'
  url.port = String(port)
  return url.href
}

/**
 * A second gateway (instance A) of `raw` beside the file's shared one, on the same Redis but
 * through a hold proxy, so that a test can hold A's commands or replies at a chosen step while
 * browsers use the shared instance (B, at the address the provider's redirect URI names).
 */
export async function heldInstance (redisUrl: string, raw: Record<string, unknown>, deps?: GatewayDeps): Promise<{ gateway: TestGateway, proxy: HoldProxy, close: () => Promise<void> }> {
  const proxy = await startHoldProxy(redisUrl)
  const gateway = await startGateway({ ...raw, store: { type: 'redis', url: proxy.url } }, deps === undefined ? undefined : { deps })
  return {
    gateway,
    proxy,
    close: async () => {
      proxy.release()
      await gateway.close()
      await proxy.close()
    },
  }
}
