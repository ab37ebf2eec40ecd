// Loopback ports and servers for tests: ports come from the OS (port 0), never fixed.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/** A free loopback port, obtained by binding port 0 and releasing it. */
export async function freePort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
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
    if (await check().catch(() => false)) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`)
}
