// node:dns's lookup for this process, for tests of names whose lookup hangs. Every socket of the
// process asks `dns.lookup` (the real servers listen on loopback): names under `.localhost`
// (RFC 6761) answer 127.0.0.1 unless a test makes them hang; a hung lookup is held until the test
// ends it, with an error (the resolver gave up) or the address (the name resolves again). Other
// names go to the real lookup.
import dns from 'node:dns'
import { vi, type MockInstance } from 'vitest'
import { reserveBaseUrl, startGateway, type StartOptions, type TestGateway } from './gateway.js'
import { startOidcProvider, type TestProvider } from './oidc.js'
import { startUpstream, type Upstream } from './upstream.js'

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void
interface Held { callback: LookupCallback, all: boolean }

export class DnsStub {
  private readonly hanging = new Set<string>()
  private readonly held = new Map<string, Held[]>()
  private readonly asked = new Map<string, number>()
  private spy: MockInstance | undefined = undefined
  private readonly realLookup = dns.lookup.bind(dns) as (...args: unknown[]) => void

  /** Replaces node:dns's lookup; `restore` puts it back. */
  install (): this {
    this.spy = vi.spyOn(dns, 'lookup').mockImplementation(this.lookup as unknown as typeof dns.lookup)
    return this
  }

  /** Ends every held lookup with an error, and gives node:dns its lookup back. */
  restore (): void {
    for (const host of this.held.keys()) this.fail(host)
    this.hanging.clear()
    this.spy?.mockRestore()
  }

  /** `host`'s lookups hang from now on. */
  hang (host: string): void {
    this.hanging.add(host)
  }

  /** How many lookups of `host` were asked of node:dns so far. */
  lookups (host: string): number {
    return this.asked.get(host) ?? 0
  }

  /** How many lookups of `host` are hanging now. */
  pending (host: string): number {
    return this.held.get(host)?.length ?? 0
  }

  /** The resolver gives up on `host`'s hung lookups (`getaddrinfo EAI_AGAIN`); the name still hangs. */
  fail (host: string): void {
    const error = Object.assign(new Error(`getaddrinfo EAI_AGAIN ${host}`), { code: 'EAI_AGAIN', syscall: 'getaddrinfo', hostname: host })
    this.end(host, (held) => held.callback(error, held.all ? [] : ''))
  }

  /**
   * `host` resolves again for the lookups asked from now on, while the ones already hung stay held
   * (a getaddrinfo stuck in an NSS module: it may never return); `resolve` or `fail` ends them later.
   */
  heal (host: string): void {
    this.hanging.delete(host)
  }

  /** `host` resolves again: its hung lookups answer 127.0.0.1, and so do the next ones. */
  resolve (host: string): void {
    this.hanging.delete(host)
    this.end(host, (held) => answer(held))
  }

  private end (host: string, each: (held: Held) => void): void {
    const held = this.held.get(host) ?? []
    this.held.delete(host)
    for (const one of held) process.nextTick(each, one)
  }

  private readonly lookup = (hostname: string, options: unknown, callback?: LookupCallback): void => {
    if (typeof options === 'function') return this.lookup(hostname, {}, options as LookupCallback)
    if (!hostname.endsWith('.localhost')) return this.realLookup(hostname, options, callback)
    this.asked.set(hostname, this.lookups(hostname) + 1)
    const held = { callback: callback!, all: typeof options === 'object' && options !== null && (options as { all?: boolean }).all === true }
    if (!this.hanging.has(hostname)) return process.nextTick(answer, held)
    this.held.set(hostname, [...this.held.get(hostname) ?? [], held])
  }
}

function answer ({ callback, all }: Held): void {
  if (all) callback(null, [{ address: '127.0.0.1', family: 4 }])
  else callback(null, '127.0.0.1', 4)
}

/** The issuer's host (discovery, JWKS, the browser's pages) and the token endpoint's, of {@link startNamedStack}. */
export const ISSUER_HOST = 'idp.localhost'
export const TOKEN_HOST = 'token.localhost'

export interface NamedStack { op: TestProvider, upstream: Upstream, gateway: TestGateway }

/**
 * The real oidc-provider and an upstream reached by `.localhost` names, and a gateway whose
 * provider `demo` (route `/app/`) has its token endpoint on TOKEN_HOST; `timeoutMs` is the
 * provider's timeout, tokens from sign-in live `tokenTtlS`. `more` adds providers and routes (given
 * the upstream's port and the provider's); `deps` go to the gateway (its clock, say).
 */
export async function startNamedStack (timeoutMs: number, tokenTtlS: number, more: (ports: { upstream: number, op: number }) => { providers?: Record<string, unknown>, routes?: unknown[] }, deps: StartOptions['deps'] = {}): Promise<NamedStack> {
  const upstream = await startUpstream()
  const { port, baseUrl } = await reserveBaseUrl()
  const op = await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: [`${baseUrl}/oauth/authorized/demo/`] }], {
    publicHost: ISSUER_HOST,
    accessTokenTtl: (_client, grantType) => grantType === 'refresh_token' ? 3600 : tokenTtlS,
  })
  const timeout = `${timeoutMs}ms`
  const extra = more({ upstream: Number(new URL(upstream.url).port), op: op.port })
  const gateway = await startGateway({
    server: { port, baseUrl },
    store: { type: 'memory' },
    providers: {
      demo: { clientId: 'c', clientSecret: 's', issuer: op.issuer, scope: 'openid offline_access', tokenUrl: `http://${TOKEN_HOST}:${op.port}/token`, timeout },
      ...extra.providers,
    },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }, ...(extra.routes ?? [])],
  }, { deps })
  return { op, upstream, gateway }
}
