// How oidc-provider fetches a client's metadata document (OAuth Client ID Metadata Documents): its
// own connection pool refuses a host that resolves to a private, loopback or other special-use
// address (checked on the connected socket, so a DNS answer cannot slip one in); a host the
// operator listed in agents.clientMetadataPrivateHosts goes through a pool that allows it. Its
// timeout (2.5 s), size cap (5 KiB) and refusal of redirects are oidc-provider's own.
import { rootCertificates } from 'node:tls'
import type { Configuration } from 'oidc-provider'
import { Agent, fetch as poolFetch } from 'undici'
import type { Clock } from '../ops/clock.js'
import { Lru } from '../ops/lru.js'

/** How long a document whose fetch failed fails at once, and how many such documents are remembered. */
const FAILED_FETCH_MS = 30_000
const FAILED_FETCHES = 1000

/** oidc-provider's `fetch`: `extraCa`, a certificate authority the listed hosts may be signed by besides Node's (tests: their own). */
export function documentFetch (privateHosts: readonly string[], clock: Clock, extraCa: string | undefined): NonNullable<Configuration['fetch']> {
  const listed = new Set(privateHosts)
  let pool: Agent | undefined
  /** Documents whose fetch failed (timed out, refused, an address not allowed): until when they fail at once. */
  const failed = new Lru<string, number>(FAILED_FETCHES)
  const fetchOnce = async (href: string, init: RequestInit): Promise<Response> => {
    const host = URL.parse(href)?.hostname.toLowerCase()
    if (host === undefined || !listed.has(host)) return await fetch(href, init)
    pool ??= new Agent(extraCa === undefined ? {} : { connect: { ca: [...rootCertificates, extraCa] } })
    const { dispatcher: _checked, ...rest } = init as RequestInit & { dispatcher?: unknown }
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
