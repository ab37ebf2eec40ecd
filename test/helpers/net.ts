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

/** Listens on a loopback port from the OS; returns the base URL. */
export async function listen (server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

export async function close (server: Server): Promise<void> {
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
}

/** Polls `check` until it returns true or the deadline passes. */
export async function waitFor (check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await check().catch(() => false)) return
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
}
