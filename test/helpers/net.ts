// Loopback ports and servers for tests: never fixed; from the OS (port 0) for a server of the test
// process itself, from a block of the worker's own for one another process binds (freePort).
import { randomInt } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/** Whether `port` can be bound on loopback now (it is let go again at once). */
export async function bindable (port: number): Promise<boolean> {
  const server = createServer()
  return await new Promise((resolve) => {
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

/**
 * Ports for a server another process binds (a gateway, Redis, nginx a test starts): below the OS's
 * ephemeral range, from a block of this test worker's own. A port the OS handed out for port 0 and
 * took back could be handed out again before that process bound it: as the port of another test's
 * server listening on port 0 (which then took the requests meant for the process, and a check
 * asking it once hung until the hook's timeout; the process itself exited with EADDRINUSE), or as
 * the local end of an outgoing connection. The OS hands out neither from below its range, and no
 * other worker takes from this block, so what can be in the way is only this worker's own earlier
 * ports, still bound (skipped). 9 blocks (bench, and workers 1-8) of 1,100 end below 20,000, and
 * their Redis Cluster bus ports (+10,000) below 30,000. Where the ephemeral range starts lower than
 * that (not Linux's default), the OS's port 0 as before.
 */
const BLOCKS_FROM = 10_000
const BLOCK = 1_100
const BLOCKS = 9
let offset = randomInt(BLOCK)

function ephemeralFrom (): number {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0])
  } catch {
    return 0
  }
}
const belowEphemeral = ephemeralFrom() > BLOCKS_FROM + BLOCK * BLOCKS + 10_000

/**
 * The ports above 1023 that fetch refuses to connect to ("bad port", the Fetch standard's port
 * blocking list, which undici follows): a server on one of them can never be reached by the tests'
 * fetch. 10080 is in the bench's block; a bench run that drew it waited 20 s and failed.
 * @see https://fetch.spec.whatwg.org/#port-blocking
 */
const FETCH_BLOCKED = new Set([1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080])

/** Whether fetch can connect to `port`. */
export const fetchable = (port: number) => port > 1023 && !FETCH_BLOCKED.has(port)

/** A loopback port free now, for a server another process will bind (see `BLOCKS_FROM`). */
export async function freePort (): Promise<number> {
  if (!belowEphemeral) return await portFromOs()
  const first = BLOCKS_FROM + (Number(process.env.VITEST_POOL_ID ?? 0) % BLOCKS) * BLOCK
  for (let tried = 0; tried < BLOCK; tried++) {
    const port = first + (offset++ % BLOCK)
    if (fetchable(port) && await bindable(port)) return port
  }
  throw new Error(`no free loopback port in ${first}-${first + BLOCK - 1}`)
}

/** A free loopback port fetch can reach, obtained by binding port 0 and releasing it. */
async function portFromOs (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return fetchable(port) ? port : await portFromOs()
}

/**
 * Ports from the OS kept bound (unref'd) until the server meant for them is about to listen. A port
 * freed at once and used seconds later can be taken in between as the local port of one of the many
 * outgoing connections the suite makes (the OS draws both from the same range); the listen then
 * fails with EADDRINUSE. Holding it closes that window to the moment of the hand-over.
 */
const held = new Map<number, Server>()

async function bindAndHold (port: number): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', resolve)
  })
  server.unref()
  const bound = (server.address() as AddressInfo).port
  held.set(bound, server)
  return bound
}

/** A loopback port from the OS, held until {@link releasePort} (see `held`). */
export async function holdPort (): Promise<number> {
  return await bindAndHold(0)
}

/** Lets go of a port {@link holdPort} holds, right before its server listens; nothing if it is not held. */
export async function releasePort (port: number): Promise<void> {
  const server = held.get(port)
  if (!server) return
  held.delete(port)
  await new Promise<void>((resolve) => server.close(() => resolve()))
}

/** Holds `port` again after its server closed (the next user of the same reserved port); false if it was taken meanwhile. True if it is held already. */
export async function holdAgain (port: number): Promise<boolean> {
  if (held.has(port)) return true
  return await bindAndHold(port).then(() => true, () => false)
}

/**
 * An http URL whose connections are refused, and stay refused for the whole run. A port released
 * again (freePort) can be bound by the next test's server, which then answers in its place; here the
 * port stays held on 127.0.0.1, so the OS neither hands it out as a local port nor lets a server
 * bind it there or on 0.0.0.0, and the URL names 127.0.0.2 (also loopback), where nothing listens.
 */
export async function refusedUrl (): Promise<string> {
  return `http://127.0.0.2:${await holdPort()}`
}

/** Listens on a loopback port from the OS; returns the base URL. */
export async function listen (server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

export async function close (server: Server): Promise<void> {
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
}

/**
 * Polls `check` until it returns true or the deadline passes.
 * @param what what is waited for; a function is asked at the deadline, so that the error can say
 *   what the awaited process had said by then (its log, its exit)
 */
export async function waitFor (check: () => Promise<boolean>, timeoutMs: number, what: string | (() => string)): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    // A check that never settles (a request to a server that accepted and never answers) ends at the deadline too.
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<false>((resolve) => { timer = setTimeout(() => resolve(false), Math.max(0, deadline - Date.now())) })
    const done = await Promise.race([check().catch(() => false), late])
    clearTimeout(timer)
    if (done) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`)
}
