// A Redis Cluster failover: three masters with a replica each (cluster-node-timeout 2 s: with 1 s a
// machine busy with the rest of the suite saw masters failed over before the test killed one); the
// master holding a signed-in session is killed under steady requests and its replica promoted. The
// session survives (200 again, on the promoted replica); meanwhile a valid session gets only 200 or
// 503, never 401 or a sign-in redirect; /readyz stays 200 while part of the cluster is down; the
// dead master is logged unreachable once, and no failed request is logged at error level.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { hammer, startFaultStack, type FaultStack } from '../helpers/fault-stack.js'
import { waitFor } from '../helpers/net.js'
import { redisCli, startRedisCluster, type TestCluster } from '../helpers/redis-cluster.js'

let cluster: TestCluster
let stack: FaultStack

beforeAll(async () => {
  cluster = await startRedisCluster({ replicas: 1, nodeTimeoutMs: 2000 })
  stack = await startFaultStack({ store: { type: 'redis', cluster: cluster.urls }, session: { cacheTtl: '0s' } })
})
afterAll(async () => {
  await stack?.close()
  await cluster?.stop()
})

/** The ports of the master holding a key under `pattern` and of its replica, once the replica holds that key too. */
async function masterHolding (pattern: string): Promise<{ master: number, replica: number }> {
  for (const port of cluster.ports) {
    if (!(await redisCli(port, 'role')).startsWith('master')) continue
    const key = (await redisCli(port, '--scan', '--pattern', pattern)).trim()
    if (key === '') continue
    // Redis replicates asynchronously: a write the replica has not received is lost with its master,
    // which is Redis's behaviour, not the gateway's. So the kill waits until the replica has the key.
    // (WAIT from another connection proves nothing: it counts replicas, not this write.)
    const replica = Number(/slave0:ip=[^,]+,port=(\d+)/.exec(await redisCli(port, 'info', 'replication'))?.[1])
    await waitFor(async () => (await redisCli(replica, '--scan', '--pattern', key)).trim() === key, 30_000, `the replica ${replica} of ${port} to have the session`).catch(async (error: Error) => {
      throw new Error(`${error.message}\nreplica:\n${await redisCli(replica, 'info', 'replication').catch(String)}\ncluster nodes:\n${await redisCli(port, 'cluster', 'nodes').catch(String)}`)
    })
    return { master: port, replica }
  }
  throw new Error(`no master holds ${pattern}`)
}

describe('a Redis Cluster master killed and its replica promoted', () => {
  it('keeps the session: 200, 503 while the slots have no master, then 200 again; never 401 or a sign-in redirect', async () => {
    const cookie = await stack.signIn()
    const { master } = await masterHolding('gw:session:*')
    const load = hammer(`${stack.gateway.url}/app/x`, cookie, 4)
    await waitFor(async () => load.answers.length >= 20, 10_000, 'steady load')

    await cluster.kill(master)
    await waitFor(async () => load.answers.at(-1)?.status === 503, 10_000, 'requests for that session to fail')
    const readyWhileDown = await fetch(`${stack.gateway.url}/readyz`)
    // Redis elects the replica within a few seconds of cluster-node-timeout; a machine busy with
    // the rest of the suite can take longer. On a timeout, say which side was late.
    await waitFor(async () => load.answers.at(-1)?.status === 200, 30_000, 'the replica to take over').catch(async (error: Error) => {
      const nodes = await redisCli(cluster.ports.find((port) => port !== master)!, 'cluster', 'nodes').catch(String)
      throw new Error(`${error.message}\ncluster nodes:\n${nodes}\nlast answers: ${JSON.stringify(load.answers.slice(-3).map(({ status, body }) => ({ status, body })))}`)
    })
    const answered = load.answers.length
    await waitFor(async () => load.answers.length >= answered + 20, 10_000, 'requests after the failover')
    const answers = await load.stop()

    expect(new Set(answers.map((answer) => answer.status))).toEqual(new Set([200, 503]))
    expect(answers.some((answer) => answer.location !== null)).toBe(false)
    expect(answers.slice(-10).every((answer) => answer.status === 200)).toBe(true)
    // Part of the store answers: the instance stays in the load balancer.
    expect(readyWhileDown.status).toBe(200)
    expect(await readyWhileDown.json()).toMatchObject({ status: 'ready', store: expect.stringMatching(/^(degraded|up)$/) })

    const lines = stack.gateway.logs.map((line) => JSON.parse(line) as { level: number, msg: string, node?: string, reason?: string })
    expect(lines.filter((line) => line.level >= 50).map((line) => line.msg)).toEqual([])
    const down = lines.filter((line) => line.msg.startsWith('session store node unreachable'))
    const back = lines.filter((line) => line.msg.startsWith('session store node reachable again'))
    // The dead master, once. On a machine busy with the rest of the suite another node can miss the
    // command timeout for longer than the hysteresis (seen once: the gateway then says so); such a
    // node must be logged back too.
    expect(down.filter((line) => line.node === `127.0.0.1:${master}`)).toHaveLength(1)
    for (const other of down.filter((line) => line.node !== `127.0.0.1:${master}`)) {
      expect(back.some((line) => line.node === other.node), `${other.node} logged unreachable (${other.reason}) and never back`).toBe(true)
    }
    expect(lines.filter((line) => line.msg.startsWith('session store unreachable'))).toEqual([])
  }, 75_000)
})
