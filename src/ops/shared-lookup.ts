// Name lookups for the gateway's own connections (providers, upstreams): at most one at a time per
// name. node:dns's lookup runs getaddrinfo on one of libuv's four thread-pool threads and holds it
// until the system resolver answers. A name whose DNS server never answers held one thread per
// connection attempt, so a few sign-ins at once took all four, and every other lookup, file read,
// pbkdf2/scrypt and zlib call of the process waited behind them (a public route answered 504).
// Here every connection that asks for a name while a lookup of it (with the same options) is under
// way gets that lookup's answer: a hanging name costs one thread. Callers still end at their own
// timeout (the provider's, the route's); the answer is not kept once given, so the next connection
// looks the name up again.
// A lookup is shared only for as long as a connection may wait for it: each dispatcher gives its
// connect timeout (undici ends a connection attempt still looking its name up then). Once the
// longest of its callers' timeouts has passed since it began, a lookup that has not answered (a
// getaddrinfo stuck in an NSS module may never return) is left: the next connection starts a fresh
// one, so a name that resolves again works again, and a name that stays stuck costs one more thread
// per such period. The old lookup's late answer goes to its own callers that are still unanswered,
// never twice to any.
import dns from 'node:dns'
import { systemClock, type Clock } from './clock.js'

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void
/** `dns.lookup` in the form net and tls `connect` call it (their `lookup` option). */
export type LookupFunction = (hostname: string, options: dns.LookupOptions, callback: LookupCallback) => void

/** One connection waiting for a name, until its own timeout. */
interface Caller {
  callback: LookupCallback
  answered: boolean
  /** When the connection stops waiting for the lookup (its connect timeout). */
  givesUpAt: number
}

/** One lookup under way and the connections waiting for it. */
interface Shared {
  startedAt: number
  /** Once this has passed, the next connection starts a fresh lookup. */
  staleAt: number
  callers: Caller[]
}

function lookupKey (hostname: string, options: dns.LookupOptions): string {
  return JSON.stringify([hostname, options.family ?? 0, options.hints ?? 0, options.all === true, options.order ?? null, options.verbatim ?? null])
}

function answer (caller: Caller, error: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number): void {
  if (caller.answered) return
  caller.answered = true
  try {
    // Each socket gets its own list of addresses.
    caller.callback(error, Array.isArray(address) ? address.slice() : address, family)
  } catch (thrown) {
    // As if its own lookup had called it: the others still get their answer.
    process.nextTick(() => { throw thrown })
  }
}

/**
 * The lookups under way, by name and options, on `clock`'s time; `lookup` is node:dns's by default
 * (read at each call, so that a test's stub of `dns.lookup` is the one asked).
 */
export class SharedLookups {
  private readonly underWay = new Map<string, Shared>()

  constructor (
    private readonly clock: Clock = systemClock,
    private readonly lookup: LookupFunction = (hostname, options, callback) => dns.lookup(hostname, options, callback)
  ) {}

  /**
   * The lookup function for connections that wait at most `timeoutMs` for a name (the connect
   * timeout of the dispatcher that uses it).
   * @see https://nodejs.org/api/dns.html#implementation-considerations (dns.lookup and libuv's thread pool)
   */
  for (timeoutMs: number): LookupFunction {
    return (hostname, options, callback) => this.join(hostname, options, callback, timeoutMs)
  }

  private join (hostname: string, options: dns.LookupOptions, callback: LookupCallback, timeoutMs: number): void {
    const key = lookupKey(hostname, options)
    const now = this.clock.now()
    const caller: Caller = { callback, answered: false, givesUpAt: now + timeoutMs }
    const current = this.underWay.get(key)
    if (current !== undefined && now < current.staleAt) {
      current.callers.push(caller)
      // Bounded by the lookup's start, not by the last join: a stream of connections cannot keep it.
      current.staleAt = Math.max(current.staleAt, current.startedAt + timeoutMs)
      return
    }
    // The connections still waiting for a stale lookup take whichever answer comes first.
    const waiting = current?.callers.filter((one) => !one.answered && now < one.givesUpAt) ?? []
    const shared: Shared = { startedAt: now, staleAt: now + timeoutMs, callers: [caller, ...waiting] }
    this.underWay.set(key, shared)
    try {
      this.lookup(hostname, options, (error, address, family) => {
        // A stale lookup's late answer leaves the fresh one under way.
        if (this.underWay.get(key) === shared) this.underWay.delete(key)
        for (const one of shared.callers) answer(one, error, address, family)
      })
    } catch (error) {
      if (current === undefined) this.underWay.delete(key)
      else this.underWay.set(key, current)
      throw error
    }
  }
}

const lookups = new SharedLookups()

/**
 * `dns.lookup` as net and tls `connect` call it (their `lookup` option), joined to the lookup of
 * the same name and options under way if there is one and it began less than the longest of its
 * callers' timeouts ago. `timeoutMs` is how long the connections using it wait for a name: the
 * dispatcher's connect timeout.
 */
export function sharedLookup (timeoutMs: number): LookupFunction {
  return lookups.for(timeoutMs)
}
