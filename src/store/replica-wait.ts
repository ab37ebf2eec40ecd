// Writes that count as done only once a replica has acknowledged them (store.waitForReplica,
// reliability round 3): a new session, a refreshed one, an ended one (its delete, a logout's mark). Redis replicates asynchronously, so a
// master cut off from its replicas but not from the gateway (a split brain) takes writes that its
// demotion throws away; `WAIT 1 <store.timeout>` after the write tells whether a replica has it.
// @see https://redis.io/docs/latest/commands/wait/
import { Cluster, Command, type ChainableCommander, type Pipeline, type Redis } from 'ioredis'
import { OutageLog } from './outage-log.js'
import { ReplicaUnacknowledged } from './store.js'

/**
 * The write and its WAIT on a connection of their own. WAIT counts the writes made on the
 * connection it is sent on, so both go in one pipeline: one network write on one connection, to
 * the node holding the key on a Redis Cluster (a pipeline goes to its keys' node), never the WAIT
 * on a connection made since (a Sentinel switch), which has written nothing and would be
 * acknowledged at once. The connection is not the one every other command uses: WAIT blocks its
 * connection until answered, up to store.timeout when no replica answers, and the requests of
 * sessions already signed in must not queue behind it.
 */
export class ReplicaWait {
  /** Pipelines sent and not answered yet: a WAIT among them holds up those sent after it. */
  private pending = 0

  constructor (
    /** The connection of these writes only (a duplicate of the store's). */
    readonly connection: Redis | Cluster,
    /** store.waitForReplica: how many replicas must acknowledge. */
    private readonly count: number,
    /** store.timeout: how long WAIT waits for a replica. */
    private readonly timeoutMs: number,
    /** Logged when no replica has acknowledged for a while, and when one does again. */
    private readonly replicas: OutageLog
  ) {}

  /**
   * Sends the commands `write` adds to a pipeline, then WAIT <count> store.timeout: the last
   * command's reply once that many replicas have acknowledged them. Throws a command's own error
   * (Redis's reply, a timeout), or {@link ReplicaUnacknowledged} when WAIT counted no replica.
   */
  async write<T> (write: (pipeline: ChainableCommander) => void): Promise<T> {
    // A cluster not connected yet would hold the pipeline until it is, past every timeout.
    if (this.connection instanceof Cluster && this.connection.status !== 'ready') throw new Error('Connection is closed.')
    const wait = new Command('wait', [this.count, this.timeoutMs], { replyEncoding: 'utf8' })
    // Redis answers WAIT after store.timeout at the latest; its answer may then take up to one
    // more command's time to arrive. (A timer set here is kept: ioredis sets commandTimeout only
    // on a command that has none.)
    wait.setTimeout(2 * this.timeoutMs)
    const pipeline = this.connection.pipeline()
    write(pipeline)
    ;(pipeline as unknown as Pipeline).sendCommand(wait)
    const queued = this.pending > 0
    this.pending++
    try {
      const replies = await pipeline.exec() ?? []
      const [written, waited] = replies.slice(-2)
      if (!written || !waited) throw new Error('Connection is closed.')
      for (const [error] of replies) if (error) throw error
      const replicas = Number(waited[1])
      if (replicas < this.count) {
        const which = this.count === 1 ? 'no replica' : `${replicas} of the ${this.count} replicas`
        throw this.unacknowledged(`${which} acknowledged the write within ${this.timeoutMs} ms (WAIT ${this.count} ${this.timeoutMs} answered ${replicas})`)
      }
      this.replicas.succeeded()
      return written[1] as T
    } catch (error) {
      // Sent behind a WAIT that waited for a replica: the master did not fail to answer, it had not
      // come to this write yet. (A master that does not answer at all is the store's own connection's
      // outage, logged there.)
      if (queued && error instanceof Error && error.message === 'Command timed out') {
        throw this.unacknowledged(`no replica acknowledged the writes sent before this one within ${this.timeoutMs} ms`)
      }
      throw error
    } finally {
      this.pending--
    }
  }

  private unacknowledged (reason: string): ReplicaUnacknowledged {
    this.replicas.failed(reason)
    return new ReplicaUnacknowledged(reason)
  }

  close (): void {
    this.replicas.close()
  }
}
