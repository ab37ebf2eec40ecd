// How the gateway fetches a client's metadata document (OAuth Client ID Metadata Documents) for
// oidc-provider: a host that is or resolves to a private, loopback or other special-use address is
// refused before any connection (an outside tester's finding: oidc-provider's own pool judged the
// address of a socket already connected, so a stranger's `client_id` opened TCP connections and TLS
// handshakes to any internal host and port, a blind port scan), by the lookup the connection then
// uses, so a DNS answer cannot slip one in; a host the operator listed in
// agents.clientMetadataPrivateHosts goes through a pool that allows it. Its timeout (2.5 s), size
// cap (5 KiB) and refusal of redirects are oidc-provider's own.
import { lookup, type LookupAddress, type LookupOptions } from 'node:dns'
import { BlockList, isIP } from 'node:net'
import { rootCertificates } from 'node:tls'
import type { Configuration } from 'oidc-provider'
import { Agent, fetch as poolFetch } from 'undici'
import type { Clock } from '../ops/clock.js'
import { Lru } from '../ops/lru.js'

/**
 * The special-use ranges (the IANA IPv4 and IPv6 Special-Purpose Address Registries, those
 * oidc-provider refuses, and multicast); an IPv4-mapped IPv6 address is judged as its IPv4 one.
 */
const SPECIAL_USE = (() => {
  const list = new BlockList()
  for (const range of ['0.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12', '192.0.0.0/24', '192.0.2.0/24',
    '192.31.196.0/24', '192.52.193.0/24', '192.88.99.0/24', '192.168.0.0/16', '192.175.48.0/24', '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24',
    '224.0.0.0/4', '240.0.0.0/4']) list.addSubnet(range.split('/')[0]!, Number(range.split('/')[1]), 'ipv4')
  for (const range of ['::/128', '::1/128', '64:ff9b::/96', '64:ff9b:1::/48', '100::/64', '100:0:0:1::/64', '2001::/23', '2001:db8::/32', '2002::/16',
    '2620:4f:8000::/48', '3fff::/20', '5f00::/16', 'fc00::/7', 'fe80::/10', 'ff00::/8']) list.addSubnet(range.split('/')[0]!, Number(range.split('/')[1]), 'ipv6')
  return list
})()

/** Whether `address` (an IP address, an IPv6 one with or without its brackets) is special-use. */
export function specialUse (address: string): boolean {
  const bare = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address
  const family = isIP(bare)
  return family !== 0 && SPECIAL_USE.check(bare, family === 4 ? 'ipv4' : 'ipv6')
}

/**
 * dns.lookup that fails for a name any of whose addresses is special-use: the connection uses what
 * it answers, so the address judged is the address connected to (Node asks for all of them when it
 * tries both families).
 */
function publicLookup (hostname: string, options: LookupOptions, callback: (error: Error | null, address: string | LookupAddress[], family?: number) => void): void {
  lookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error !== null) return callback(error, [])
    if (addresses.length === 0 || addresses.some(({ address }) => specialUse(address))) return callback(new Error(`${hostname} resolves to a private or special-use address`), [])
    if (options.all === true) return callback(null, addresses)
    callback(null, addresses[0]!.address, addresses[0]!.family)
  })
}

/** How long a document whose fetch failed fails at once, and how many such documents are remembered. */
const FAILED_FETCH_MS = 30_000
const FAILED_FETCHES = 1000

/** oidc-provider's `fetch`: `extraCa`, a certificate authority the listed hosts may be signed by besides Node's (tests: their own). */
export function documentFetch (privateHosts: readonly string[], clock: Clock, extraCa: string | undefined): NonNullable<Configuration['fetch']> {
  const listed = new Set(privateHosts)
  let listedPool: Agent | undefined
  let publicPool: Agent | undefined
  /** Documents whose fetch failed (timed out, refused, an address not allowed): until when they fail at once. */
  const failed = new Lru<string, number>(FAILED_FETCHES)
  const fetchOnce = async (href: string, init: RequestInit): Promise<Response> => {
    const host = URL.parse(href)?.hostname.toLowerCase() ?? ''
    let pool: Agent
    if (listed.has(host)) {
      pool = listedPool ??= new Agent(extraCa === undefined ? {} : { connect: { ca: [...rootCertificates, extraCa] } })
    } else {
      // An address in the URL is connected to without a lookup: judged here.
      if (specialUse(host)) throw new Error(`${host} is a private or special-use address`)
      pool = publicPool ??= new Agent({ connect: { lookup: publicLookup } })
    }
    // oidc-provider's own pool (its `dispatcher`) judges only a socket already connected: ours instead.
    const { dispatcher: _theirs, ...rest } = init as RequestInit & { dispatcher?: unknown }
    // undici's fetch, for undici's pool: its Response is the global one's twin (typed apart by the two packages).
    return await poolFetch(href, { ...rest, dispatcher: pool } as Parameters<typeof poolFetch>[1]) as unknown as Response
  }
  return async (url, init) => {
    const href = url instanceof URL ? url.href : String(url)
    // oidc-provider may look a client up more than once for one request: a document that failed
    // does not hold each of them for the whole fetch timeout again.
    if ((failed.get(href) ?? 0) > clock.now()) throw new Error('this client metadata document could not be fetched moments ago')
    const fail = () => { failed.set(href, clock.now() + FAILED_FETCH_MS) }
    try {
      return failingWithBody(await fetchOnce(href, init ?? {}), fail)
    } catch (error) {
      fail()
      throw error
    }
  }
}

/**
 * `response` with a body whose failure to arrive (the fetch timeout firing while oidc-provider reads
 * it) calls `fail`, as a failure before the headers does: a document that sends its headers and
 * then trickles forever was looked up again within the same request, each time for the whole
 * timeout, and never failed at once (an outside tester's finding). A body oidc-provider cancels
 * (over its size cap, with or without a Content-Length) is a document that arrived, and is not
 * remembered.
 */
function failingWithBody (response: Response, fail: () => void): Response {
  if (response.body === null) return response
  const reader = response.body.getReader()
  // Cancelled by oidc-provider (over its cap): what the read under way then does is no failure.
  let cancelled = false
  const body = new ReadableStream<Uint8Array>({
    async pull (controller) {
      let chunk: Awaited<ReturnType<typeof reader.read>>
      try {
        chunk = await reader.read()
      } catch (error) {
        if (!cancelled) fail()
        controller.error(error)
        return
      }
      if (cancelled) return
      if (chunk.done) controller.close()
      else controller.enqueue(chunk.value)
    },
    async cancel (reason) {
      cancelled = true
      await reader.cancel(reason)
    },
    // Nothing is read before oidc-provider asks for it (a stream pulls one chunk ahead by default).
  }, { highWaterMark: 0 })
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers })
}
