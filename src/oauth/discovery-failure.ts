// What a failed OIDC discovery logs: the URL it fetched (without its query, which could carry a
// value nobody should find in the logs) and what came back: the HTTP status, or the network
// error's code (ECONNREFUSED, ENOTFOUND, a timeout). oauth4webapi's own sentence ("unexpected HTTP
// status code") does not say which URL or which status, the first things an operator looks at.

/** A discovery request that failed, with what the log should say about it. */
export class DiscoveryFailure extends Error {
  constructor (readonly url: string, readonly status: number | undefined, readonly code: string | undefined, cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause })
    this.name = 'DiscoveryFailure'
  }

  /** `HTTP 404`, `ECONNREFUSED`: the short answer a log line leads with. */
  get outcome (): string {
    if (this.status !== undefined) return `HTTP ${this.status}`
    return this.code ?? 'no answer'
  }
}

/** The discovery document's URL for `issuer` (OpenID Connect Discovery 1.0 section 4), shown without query or fragment. */
export function discoveryUrl (issuer: URL): string {
  const url = new URL(issuer.href)
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/.well-known/openid-configuration`
  url.search = ''
  url.hash = ''
  url.username = ''
  url.password = ''
  return url.href
}

/** The code of a network error somewhere in `error`'s causes (`ECONNREFUSED`), or `timeout`. */
export function networkCode (error: unknown): string | undefined {
  for (let here = error, depth = 0; here instanceof Error && depth < 5; here = here.cause, depth++) {
    if (here.name === 'TimeoutError' || here.name === 'AbortError') return 'timeout'
    const code = (here as { code?: unknown }).code
    if (typeof code === 'string' && code !== '') return code
    // An AggregateError (each address of a name refused) holds the codes in its errors.
    const first = (here as { errors?: unknown[] }).errors?.[0]
    if (first !== undefined) return networkCode(first)
  }
  return undefined
}

/** An endpoint's address as a log line names it: no query, fragment or credentials. */
export function loggedEndpoint (address: string): string {
  const url = new URL(address)
  return `${url.origin}${url.pathname}`
}
