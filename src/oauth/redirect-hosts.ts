// Which hosts outside the gateway a browser may be sent back to (forwardAuth.allowedRedirectHosts):
// the one test of an absolute redirect target's host and port, used by `safeNext`.
// Also the one spelling of a forwarded host that forwardAuth.hosts is looked up by (`hostKey`).
// @see https://www.rfc-editor.org/rfc/rfc9700#section-4.11 (open redirection)

interface HostRule {
  /** Lower-case host name or IPv4 address, without a leading dot. */
  host: string
  /** A leading dot in the entry: the host and every host under it. */
  subdomains: boolean
  /** The port as the URL parser gives it ('' for the scheme's default port). */
  port: string
}

/** The port a URL of `protocol` reaches when it names none. */
const DEFAULT_PORTS: Readonly<Record<string, string>> = { 'http:': '80', 'https:': '443' }

/**
 * forwardAuth.allowedRedirectHosts, compiled once (entries are already validated by the config),
 * and the gateway's own origin (`ownOrigin`): the absolute targets a browser may be sent to.
 */
export class RedirectHosts {
  private readonly rules: HostRule[]

  constructor (entries: readonly string[], private readonly ownOrigin?: string) {
    this.rules = entries.map((entry) => {
      const colon = entry.lastIndexOf(':')
      const name = colon === -1 ? entry : entry.slice(0, colon)
      return { host: name.replace(/^\./, ''), subdomains: name.startsWith('.'), port: colon === -1 ? '' : entry.slice(colon + 1) }
    })
  }

  /** No host is listed and no own origin is known: absolute redirect targets are never allowed. */
  get empty (): boolean {
    return this.rules.length === 0 && this.ownOrigin === undefined
  }

  /**
   * Whether `url` (already parsed by the WHATWG URL parser, so `hostname` is lower-case ASCII and
   * `port` is '' for the default port) is on the gateway's own origin or a listed host. A host listed
   * without a port allows only the scheme's default port, and one listed with a port allows the URLs
   * that reach that port, written or not (`host:443` allows `https://host/`: an outside tester's
   * finding); a leading dot allows the domain itself and every subdomain, on a label boundary
   * (`.example.com` allows `a.example.com`, never `evilexample.com`).
   */
  allows (url: URL): boolean {
    if (url.origin === this.ownOrigin) return true
    const port = url.port === '' ? DEFAULT_PORTS[url.protocol] : url.port
    return this.rules.some((rule) => (rule.port === '' ? url.port === '' : rule.port === port) &&
      (url.hostname === rule.host || (rule.subdomains && url.hostname.endsWith(`.${rule.host}`))))
  }
}

/**
 * The host of `url` as forwardAuth.hosts names it: the parser's lower-case ASCII host name without
 * its port, and without the one trailing dot DNS ignores (`payroll.example.com.` is the same host).
 */
export function hostKey (url: URL): string {
  return url.hostname.endsWith('.') ? url.hostname.slice(0, -1) : url.hostname
}
