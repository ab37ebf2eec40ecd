// A real Redis Sentinel for tests: `startSentinel` is one `redis-server --sentinel` on a free
// loopback port watching a given Redis as the master "mymaster" (quorum 1). `startSentinelSet` is a
// whole Sentinel deployment of spawned servers: a master, a replica and one sentinel or more (each
// a quorum alone), with Sentinel's failure detection set short (failover tests), and optionally
// passwords (an ACL user on the Redis nodes, another on the sentinels) and TLS on every connection
// (see tls-cert.ts). Each sentinel can be frozen, killed and started again on its port.
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis, type RedisOptions } from 'ioredis'
import { freePort, waitFor } from './net.js'
import { TEST_CERT, TEST_KEY } from './tls-cert.js'

export interface TestSentinel {
  /** host:port, as store.sentinel.nodes takes it */
  node: string
  stop (): Promise<void>
}

async function knowsMaster (port: number): Promise<boolean> {
  return await new Promise((resolve) => {
    const socket = new Socket()
    const done = (ok: boolean) => { socket.destroy(); resolve(ok) }
    socket.setTimeout(500, () => done(false))
    socket.once('error', () => done(false))
    socket.connect(port, '127.0.0.1', () => socket.write('SENTINEL get-master-addr-by-name mymaster\r\n'))
    socket.once('data', (data) => done(data.toString().startsWith('*2')))
  })
}

export async function startSentinel (masterUrl: string): Promise<TestSentinel> {
  const master = new URL(masterUrl)
  const port = await freePort()
  const dir = await mkdtemp(join(tmpdir(), 'gw-sentinel-'))
  const file = join(dir, 'sentinel.conf')
  await writeFile(file, `port ${port}\nbind 127.0.0.1\ndir ${dir}\nsentinel monitor mymaster ${master.hostname} ${master.port} 1\n`)
  const child = spawn('redis-server', [file, '--sentinel'], { stdio: 'ignore' })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  await waitFor(() => knowsMaster(port), 10_000, `redis sentinel on port ${port}`)
  return {
    node: `127.0.0.1:${port}`,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
    },
  }
}

export interface SentinelSetOptions {
  /** Sentinel's down-after-milliseconds: how long the master may be silent before it is failed over. */
  downAfterMs?: number
  /** Sentinel's failover-timeout. */
  failoverTimeoutMs?: number
  /** An ACL user the Redis nodes require (the default user is off); the sentinel and the replica use it too. */
  redisUser?: { username: string, password: string }
  /** An ACL user the sentinel requires of its clients (the default user is off). */
  sentinelUser?: { username: string, password: string }
  /** TLS only, on every server and every link between them (tls-cert.ts's certificate). */
  tls?: boolean
  /** How many sentinels watch the set (1 by default); each alone is a quorum. */
  sentinels?: number
}

/** One spawned Redis of the set. */
export interface SetMember {
  port: number
  /** SIGSTOP: the process stays, its sockets stay open, nothing is answered. */
  freeze (): void
  /** SIGCONT. */
  thaw (): void
}

/** One sentinel process of the set. */
export interface SentinelProcess extends SetMember {
  /** SIGKILL; resolves once it has exited (its port is free again). */
  kill (): Promise<void>
  /** Starts it again on the same port with its config file (as it rewrote it); resolves once it answers. */
  start (): Promise<void>
}

export interface TestSentinelSet {
  /** The sentinels, host:port, as store.sentinel.nodes takes them. */
  nodes: string[]
  master: SetMember
  replica: SetMember
  /** The first sentinel. */
  sentinel: SentinelProcess
  /** Every sentinel, in the order of `nodes`. */
  sentinels: SentinelProcess[]
  /** The CA file (tls only): what NODE_EXTRA_CA_CERTS names. */
  caFile: string | undefined
  /** A client of one of the Redis nodes (or, by its port, the sentinel), authenticated and over TLS as the set is. */
  client (port: number, options?: RedisOptions): Redis
  /** `question` asked of a client of `port` (as {@link client} makes it), disconnected afterwards. */
  ask<T> (port: number, question: (redis: Redis) => Promise<T>): Promise<T>
  stop (): Promise<void>
}

/**
 * Whether a replica of the master `redis` is connected to acknowledges a write made on it: `key`
 * set, WAIT 1 for 100 ms on the same connection, then deleted. Undefined (never thrown) when the
 * master refuses `key` (MOVED: a cluster node that does not own its slot).
 */
export async function acknowledged (redis: Redis, key: string): Promise<boolean | undefined> {
  try {
    await redis.set(key, '1')
  } catch {
    return undefined
  }
  const replicas = await redis.wait(1, 100)
  await redis.del(key)
  return replicas >= 1
}

/** ACL line of a user with every right, password `password`. */
const aclUser = ({ username, password }: { username: string, password: string }) => `user ${username} on >${password} ~* &* +@all`

export async function startSentinelSet (options: SentinelSetOptions = {}): Promise<TestSentinelSet> {
  const dir = await mkdtemp(join(tmpdir(), 'gw-sentinel-set-'))
  const certFile = join(dir, 'cert.pem')
  const keyFile = join(dir, 'key.pem')
  await writeFile(certFile, TEST_CERT)
  await writeFile(keyFile, TEST_KEY)
  const [masterPort, replicaPort] = [await freePort(), await freePort()] as [number, number]
  const sentinelPorts: number[] = []
  for (let i = 0; i < (options.sentinels ?? 1); i++) sentinelPorts.push(await freePort())
  // With TLS only the tls-port listens, and replication and Sentinel's links use TLS too.
  const listen = (port: number) => options.tls
    ? ['port 0', `tls-port ${port}`, `tls-cert-file ${certFile}`, `tls-key-file ${keyFile}`, `tls-ca-cert-file ${certFile}`, 'tls-auth-clients no', 'tls-replication yes']
    : [`port ${port}`]
  const redisUser = options.redisUser
  const redisLines = (port: number) => [
    ...listen(port), 'bind 127.0.0.1', `dir ${dir}`, `dbfilename dump-${port}.rdb`, 'save ""', 'appendonly no',
    // A replica's first full copy starts at once, not after Redis's default 5 s wait for more replicas.
    'repl-diskless-sync-delay 0',
    ...(redisUser ? [aclUser(redisUser), 'user default off', `masteruser ${redisUser.username}`, `masterauth ${redisUser.password}`] : []),
  ]
  const sentinelUser = options.sentinelUser
  const sentinelLines = (sentinelPort: number) => [
    ...listen(sentinelPort), 'bind 127.0.0.1', `dir ${dir}`,
    `sentinel monitor mymaster 127.0.0.1 ${masterPort} 1`,
    `sentinel down-after-milliseconds mymaster ${options.downAfterMs ?? 30_000}`,
    `sentinel failover-timeout mymaster ${options.failoverTimeoutMs ?? 180_000}`,
    ...(redisUser ? [`sentinel auth-user mymaster ${redisUser.username}`, `sentinel auth-pass mymaster ${redisUser.password}`] : []),
    ...(sentinelUser ? [aclUser(sentinelUser), 'user default off'] : []),
  ]
  const files = { master: join(dir, 'master.conf'), replica: join(dir, 'replica.conf'), sentinel: (port: number) => join(dir, `sentinel-${port}.conf`) }
  await writeFile(files.master, redisLines(masterPort).join('\n') + '\n')
  await writeFile(files.replica, [...redisLines(replicaPort), `replicaof 127.0.0.1 ${masterPort}`].join('\n') + '\n')
  for (const port of sentinelPorts) await writeFile(files.sentinel(port), sentinelLines(port).join('\n') + '\n')

  const children: ChildProcess[] = []
  const start = (...args: string[]) => {
    const child = spawn('redis-server', args, { stdio: 'ignore' })
    children.push(child)
    return child
  }
  const member = (child: ChildProcess, port: number): SetMember => ({
    port,
    freeze: () => { child.kill('SIGSTOP') },
    thaw: () => { child.kill('SIGCONT') },
  })
  const client = (port: number, extra: RedisOptions = {}) => {
    const user = sentinelPorts.includes(port) ? sentinelUser : redisUser
    const redis = new Redis({
      host: '127.0.0.1',
      port,
      username: user?.username,
      password: user?.password,
      tls: options.tls ? { ca: TEST_CERT } : undefined,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      ...extra,
    })
    redis.on('error', () => {})
    return redis
  }
  const kill = async (child: ChildProcess) => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    // A frozen process ends on SIGKILL too.
    child.kill('SIGKILL')
    await exited
  }
  const stop = async () => { await Promise.all(children.map(kill)) }
  const ask = async <T>(port: number, question: (redis: Redis) => Promise<T>): Promise<T> => {
    const redis = client(port)
    try {
      return await question(redis)
    } finally {
      redis.disconnect()
    }
  }
  /**
   * Sentinel asks each Redis it watches for INFO every 10 s (1 s while a failover runs), and demotes
   * a failed-over master that is back only once it has reported the wrong role for four publish
   * periods (2 s each): the fault tests waited 8-10 s for that. Sentinel's own test switch
   * (`SENTINEL DEBUG`, Redis 7.0) sets the periods to 1 s and 250 ms; not a config-file directive,
   * so it is set again on every start. True once the sentinel took them.
   */
  const quicken = (port: number) => ask(port, async (r) => await r.call('SENTINEL', 'DEBUG', 'info-period', '1000', 'publish-period', '250') === 'OK')
  try {
    const master = member(start(files.master), masterPort)
    const replica = member(start(files.replica), replicaPort)
    await waitFor(() => ask(masterPort, async (r) => await r.ping() === 'PONG'), 10_000, `redis master on port ${masterPort}`)
    // The replica has finished its first full copy: until then a write to the master is not on it.
    await waitFor(() => ask(replicaPort, async (r) => /master_link_status:up/.test(await r.info('replication'))), 10_000, `redis replica on port ${replicaPort} in sync`)
    // ...and acknowledges writes: after a full copy Redis streams to a replica only from its first
    // acknowledgement (up to a second later), and a sign-in waits for one (store.waitForReplica).
    await waitFor(() => ask(masterPort, async (r) => await acknowledged(r, 'sentinel-set-probe') === true), 10_000, `redis replica on port ${replicaPort} to acknowledge writes`)
    const sentinels = sentinelPorts.map((port): SentinelProcess => {
      let child = start(files.sentinel(port), '--sentinel')
      return {
        port,
        freeze: () => { child.kill('SIGSTOP') },
        thaw: () => { child.kill('SIGCONT') },
        kill: async () => { await kill(child) },
        start: async () => {
          child = start(files.sentinel(port), '--sentinel')
          await waitFor(() => quicken(port), 10_000, `redis sentinel on port ${port} again`)
        },
      }
    })
    for (const port of sentinelPorts) await waitFor(() => quicken(port), 10_000, `redis sentinel on port ${port}`)
    // Each sentinel knows the master and, from the master's INFO, its replica.
    for (const port of sentinelPorts) {
      await waitFor(() => ask(port, async (r) => {
        const replicas = await r.call('SENTINEL', 'REPLICAS', 'mymaster') as unknown[]
        return replicas.length === 1
      }), 10_000, `redis sentinel on port ${port} to know the replica`)
    }
    const nodes = sentinelPorts.map((port) => `127.0.0.1:${port}`)
    return { nodes, master, replica, sentinel: sentinels[0]!, sentinels, caFile: options.tls ? certFile : undefined, client, ask, stop }
  } catch (error) {
    await stop()
    throw error
  }
}
