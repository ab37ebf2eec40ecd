// The suite's own ports and waits (test/helpers/net.ts): a port for another process comes from a
// block of this worker's own below the OS's ephemeral range, so no server listening on port 0 and no
// outgoing connection can take it before that process binds it; and a wait whose check never
// settles still ends at its deadline, saying what it waited for.
import { readFileSync } from 'node:fs'
import { createServer as createHttpServer } from 'node:http'
import { createServer } from 'node:net'
import { describe, expect, it } from 'vitest'
import { bindable, close, freePort, listen, waitFor } from './helpers/net.js'

const ephemeralFrom = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0])

describe('freePort', () => {
  it('gives ports below the ephemeral range, in this worker\'s block, each free and none twice in a row', async () => {
    const ports = [await freePort(), await freePort(), await freePort()]
    const block = 10_000 + (Number(process.env.VITEST_POOL_ID ?? 0) % 9) * 1_100
    for (const port of ports) {
      expect(port).toBeLessThan(ephemeralFrom)
      expect(port).toBeGreaterThanOrEqual(block)
      expect(port).toBeLessThan(block + 1_100)
      expect(await bindable(port)).toBe(true)
    }
    expect(new Set(ports).size).toBe(3)
  })

  it('skips a port of the block that is bound', async () => {
    const next = await freePort()
    // Bind the ones after it, as this worker's earlier servers would hold them.
    const holders = await Promise.all([1, 2, 3].map(async (step) => {
      const server = createServer()
      const bound = await new Promise<boolean>((resolve) => {
        server.once('error', () => resolve(false))
        server.listen(next + step, '127.0.0.1', () => resolve(true))
      })
      return { server, bound, port: next + step }
    }))
    try {
      const port = await freePort()
      expect(holders.filter(({ bound }) => bound).map(({ port: held }) => held)).not.toContain(port)
      expect(await bindable(port)).toBe(true)
    } finally {
      for (const { server, bound } of holders) if (bound) server.close()
    }
  })

  it('never hands out a port fetch refuses to connect to (10080, in the bench\'s block, once failed a CI bench run)', async () => {
    await expect(fetch('http://127.0.0.1:10080/')).rejects.toMatchObject({ cause: { message: 'bad port' } })
    const own = process.env.VITEST_POOL_ID
    process.env.VITEST_POOL_ID = '0'
    try {
      const ports = new Set<number>()
      for (let i = 0; i < 1_100; i++) ports.add(await freePort())
      expect(ports.has(10080)).toBe(false)
      expect(ports.has(10081)).toBe(true)
    } finally {
      process.env.VITEST_POOL_ID = own
    }
  })

  it('a server on port 0 never gets a port freePort hands out', async () => {
    const servers = await Promise.all(Array.from({ length: 20 }, async () => {
      const server = createHttpServer()
      return { server, port: Number(new URL(await listen(server)).port) }
    }))
    try {
      for (const { port } of servers) expect(port).toBeGreaterThanOrEqual(ephemeralFrom)
    } finally {
      await Promise.all(servers.map(async ({ server }) => { await close(server) }))
    }
  })
})

describe('waitFor', () => {
  it('ends a check that never settles at the deadline, naming what it waited for (before: the test\'s own timeout)', async () => {
    await expect(waitFor(async () => await new Promise<boolean>(() => {}), 200, 'a server that accepts and never answers'))
      .rejects.toThrow('timed out after 200 ms waiting for a server that accepts and never answers')
  })
})
