// Name lookups for the gateway's own connections (providers, upstreams): at most one at a time per
// name. node:dns's lookup runs getaddrinfo on one of libuv's four thread-pool threads and holds it
// until the system resolver answers. A name whose DNS server never answers held one thread per
// connection attempt, so a few sign-ins at once took all four, and every other lookup, file read,
// pbkdf2/scrypt and zlib call of the process waited behind them (a public route answered 504).
// Here every connection that asks for a name while a lookup of it (with the same options) is under
// way gets that lookup's answer: a hanging name costs one thread. Callers still end at their own
// timeout (the provider's, the route's); the answer is not kept once given, so the next connection
// looks the name up again.
import dns from 'node:dns'

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void

/** The callers waiting for each lookup under way, by name and options. */
const underWay = new Map<string, LookupCallback[]>()

function lookupKey (hostname: string, options: dns.LookupOptions): string {
  return JSON.stringify([hostname, options.family ?? 0, options.hints ?? 0, options.all === true, options.order ?? null, options.verbatim ?? null])
}

/**
 * `dns.lookup` as net and tls `connect` call it (their `lookup` option), joined to the lookup of
 * the same name and options under way if there is one.
 * @see https://nodejs.org/api/dns.html#implementation-considerations (dns.lookup and libuv's thread pool)
 */
export function sharedLookup (hostname: string, options: dns.LookupOptions, callback: LookupCallback): void {
  const key = lookupKey(hostname, options)
  const waiting = underWay.get(key)
  if (waiting !== undefined) {
    waiting.push(callback)
    return
  }
  const callers = [callback]
  underWay.set(key, callers)
  try {
    dns.lookup(hostname, options, (error, address, family) => {
      underWay.delete(key)
      for (const caller of callers) {
        try {
          // Each socket gets its own list of addresses.
          caller(error, Array.isArray(address) ? address.slice() : address, family)
        } catch (thrown) {
          // As if its own lookup had called it: the others still get their answer.
          process.nextTick(() => { throw thrown })
        }
      }
    })
  } catch (error) {
    underWay.delete(key)
    throw error
  }
}
