// Large answers hold a bounded amount of the gateway's memory (reliability round 3). A client that
// reads nothing stops the gateway reading the upstream: the bytes the upstream manages to write stay
// within what the sockets and streams between them can hold, counted at the upstream, even past the
// route's timeout, and the answer resumes, whole, when the client reads again. And a fast download
// leaves little garbage behind it: the chunks already written to the client are freed every few MiB
// (src/proxy/chunk-collector.ts), where V8 alone let them reach 60-100 MB in a 256 MiB download.
import { spawn } from 'node:child_process'
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises'
import http, { type IncomingMessage } from 'node:http'
import { PassThrough } from 'node:stream'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { GATEWAY_NODE_ENV, GATEWAY_NODE_FLAGS } from '../../bench/targets.js'
import { COLLECT_EVERY_BYTES, ChunkCollector } from '../../src/proxy/chunk-collector.js'
import { startGateway, TEST_SECRET, type TestGateway } from '../helpers/gateway.js'
import { startGeneratedUpstream, type GeneratedUpstream } from '../helpers/generated-upstream.js'
import { freePort, waitFor } from '../helpers/net.js'
import { Children } from '../helpers/processes.js'

const KIB = 1024
const MIB = 1024 * KIB

/** The route's timeout: a paused answer must outlive it (undici's body timeout counts only while it reads). */
const ROUTE_TIMEOUT_MS = 1000

/** The largest buffer the kernel lets one TCP socket's receive or send side grow to (the third field of the sysctl). */
async function tcpBufferMax (side: 'rmem' | 'wmem'): Promise<number> {
  return Number((await readFile(`/proc/sys/net/ipv4/tcp_${side}`, 'utf8')).trim().split(/\s+/)[2])
}

/**
 * What may lie between the upstream's writes and a client that reads nothing: four socket buffers
 * (the upstream's send side, the gateway's receive side of that connection, the gateway's send side
 * to the client, the client's receive side), each at most the kernel's maximum, and the gateway's
 * own: one socket read of 64 KiB, undici's body stream (64 KiB high-water mark), the response's
 * write queue (16 KiB mark, past which one more chunk may be queued), and the client's own read.
 */
async function bytesInBetween (): Promise<number> {
  const rmem = await tcpBufferMax('rmem')
  const wmem = await tcpBufferMax('wmem')
  return 2 * (rmem + wmem) + 64 * KIB + 64 * KIB + (16 + 64) * KIB + 64 * KIB
}

/** Reads `response` as fast as it comes (a paused one too): the bytes read so far. */
function received (response: IncomingMessage): { bytes: number } {
  const count = { bytes: 0 }
  response.on('data', (chunk: Buffer) => { count.bytes += chunk.length })
  response.resume()
  return count
}

describe('a client that reads nothing', () => {
  let upstream: GeneratedUpstream
  let gateway: TestGateway

  beforeAll(async () => {
    upstream = await startGeneratedUpstream()
    gateway = await startGateway({ routes: [{ path: '/big/', upstream: upstream.url, auth: 'none', timeout: `${ROUTE_TIMEOUT_MS}ms` }] })
  })

  afterAll(async () => {
    await gateway?.close()
    await upstream?.close()
  })

  it('stops the gateway reading the upstream, past the route timeout, and the answer resumes whole', async () => {
    const bound = await bytesInBetween()
    // Three times what may lie in between: a gateway that read on regardless would take it all.
    const size = Math.ceil(3 * bound / (64 * KIB)) * 64 * KIB
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      http.get(`${gateway.url}/big/${size}`, { agent: false }, resolve).on('error', reject)
    })
    expect(response.statusCode).toBe(200)
    response.pause()
    await waitFor(async () => upstream.blocked(), 10_000, 'the upstream to wait for its socket to drain')
    // Longer than the route's timeout: the gateway neither reads on nor cuts the answer off.
    await new Promise((resolve) => setTimeout(resolve, 2 * ROUTE_TIMEOUT_MS))
    expect(upstream.blocked()).toBe(true)
    expect(upstream.finished()).toBe(0)
    expect(upstream.written()).toBeLessThanOrEqual(bound)

    const count = received(response)
    await new Promise((resolve, reject) => response.once('end', resolve).once('error', reject))
    expect(count.bytes).toBe(size)
    expect(upstream.written()).toBe(size)
    expect(upstream.finished()).toBe(1)
  })
})

describe('a fast download through the built gateway', () => {
  const children = new Children()
  let upstream: GeneratedUpstream

  beforeAll(async () => { upstream = await startGeneratedUpstream() })
  afterAll(async () => {
    await children.end()
    await upstream?.close()
  })

  it('holds at most a few MiB of written chunks at a time', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'gw-large-answers-'))
    const file = join(dir, 'gateway.yaml')
    const port = await freePort()
    await writeFile(file, stringify({
      server: { host: '127.0.0.1', port },
      session: { secret: TEST_SECRET },
      store: { type: 'memory' },
      routes: [{ path: '/big/', upstream: upstream.url, auth: 'none' }],
    }))
    // npm start's flags and environment, and the bench's sampler: the most ArrayBuffer memory
    // any of its samples (every 100 ms) saw, written to `<memory>.<pid>`.
    const memory = join(dir, 'memory')
    const child = children.add(spawn(process.execPath, [...GATEWAY_NODE_FLAGS, '--import', './dist/bench/memory-sampler.js', 'dist/src/main.js', '--config', file], {
      stdio: 'ignore', env: { ...process.env, ...GATEWAY_NODE_ENV, LOG_LEVEL: 'warn', GATEWAY_BENCH_MEMORY: memory },
    }))
    const url = `http://127.0.0.1:${port}`
    await waitFor(async () => (await fetch(`${url}/readyz`)).ok, 10_000, 'the gateway to be ready')

    const size = 256 * MIB
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      http.get(`${url}/big/${size}`, { agent: false }, resolve).on('error', reject)
    })
    const count = received(response)
    await new Promise((resolve, reject) => response.once('end', resolve).once('error', reject))
    expect(count.bytes).toBe(size)
    // One more sample after the last chunk.
    await new Promise((resolve) => setTimeout(resolve, 200))

    const name = (await readdir(dir)).find((entry) => entry === `memory.${child.pid}`)
    const { maxArrayBuffers } = JSON.parse(await readFile(join(dir, name!), 'utf8')) as { maxArrayBuffers: number }
    // The chunks written since the last collection, as many again for those that lived through a
    // collection (in a stream at that moment: freed by a later full one) and the streams' own, and
    // what the idle process holds (about 1 MB).
    expect(maxArrayBuffers).toBeLessThanOrEqual(3 * COLLECT_EVERY_BYTES)
  })
})

describe('ChunkCollector', () => {
  it('collects once per `everyBytes` of streamed chunks, counts each body\'s, and never starts a body flowing itself', async () => {
    let collections = 0
    const collector = new ChunkCollector(100, () => { collections++ })
    const body = new PassThrough()
    const flowed = collector.watch(body)
    body.write(Buffer.alloc(60))
    body.write(Buffer.alloc(60))
    // Paused until a reader (the reply's pipe) takes it: nothing counted, nothing lost.
    await new Promise((resolve) => setImmediate(resolve))
    expect(body.readableFlowing).toBe(false)
    expect(collections).toBe(0)
    expect(flowed.bytes).toBe(0)
    const read: Buffer[] = []
    body.on('data', (chunk: Buffer) => read.push(chunk))
    body.resume()
    body.end(Buffer.alloc(100))
    await new Promise((resolve) => body.once('end', resolve))
    expect(Buffer.concat(read).length).toBe(220)
    expect(collections).toBe(2)
    expect(flowed.bytes).toBe(220)
  })
})
