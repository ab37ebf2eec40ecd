// The demo authorization server (oidc-provider, demo/authorization-server.ts) in a process of its
// own, fork()ed by the sign-in and refresh-storm benchmarks: its CPU is then read apart from the
// gateway's and the load's, and the load's timings are not delayed by the provider's work. It also
// counts, per account, the token-endpoint and userinfo requests (the gateway's back-channel calls,
// timed inside the provider) and the refresh_token grants it answered: the parent asks over IPC.
import Provider, { type Adapter, type AdapterFactory, type KoaContextWithOIDC } from 'oidc-provider'
import { startAuthorizationServer, type DemoClient } from '../demo/authorization-server.js'

export type ToProvider =
  | { type: 'start', clients: DemoClient[], accessTokenTtlS?: number }
  | { type: 'mint', clientId: string, accounts: string[], scope: string }
  | { type: 'stats' }
  | { type: 'reset' }

export interface ProviderStats {
  /** Back-channel time (token endpoint and userinfo, ms, measured inside the provider) per account. */
  backchannelMs: Record<string, number>
  /** refresh_token grants answered 200, per account. */
  refreshes: Record<string, number>
  /** refresh_token grants refused or failed, by error. */
  refreshErrors: Record<string, number>
}

export type FromProvider =
  | { type: 'started', issuer: string }
  | { type: 'minted', refreshTokens: string[] }
  | { type: 'stats', stats: ProviderStats }
  | { type: 'reset' }
  | { type: 'error', message: string }

const send = (message: FromProvider) => process.send!(message)
let stats: ProviderStats = { backchannelMs: {}, refreshes: {}, refreshErrors: {} }
let provider: Awaited<ReturnType<typeof startAuthorizationServer>>['provider'] | undefined

/**
 * oidc-provider's own in-memory adapter over a store of its own kind (an LRU) that holds ten million
 * entries: the quick-start default holds about 1,000, so thousands of grants and refresh tokens
 * pushed each other out ("refresh token not found": the refresh storm's first finding). The package
 * has no exports map, so its modules are reachable by path.
 */
async function largeMemoryAdapter (): Promise<AdapterFactory> {
  const [memory, lru] = await Promise.all([import('oidc-provider/lib/adapters/memory_adapter.js' as string), import('oidc-provider/lib/helpers/lru.js' as string)]) as [
    { default: new (model: string, store: unknown, clockTolerance: number) => Adapter }, { default: new (options: { maxSize: number }) => unknown }]
  const { default: LRU } = lru
  const { default: MemoryAdapter } = memory
  const store = new LRU({ maxSize: 10_000_000 })
  return (model: string) => new MemoryAdapter(model, store, 0)
}

/** Times the token endpoint and userinfo per account, and counts refresh_token grants. */
async function timing (ctx: KoaContextWithOIDC, next: () => Promise<void>): Promise<void> {
  const started = performance.now()
  await next()
  const path = ctx.path
  if (path !== '/token' && path !== '/me') return
  const account = ctx.oidc?.account?.accountId ?? ctx.oidc?.entities.RefreshToken?.accountId
  if (account) stats.backchannelMs[account] = (stats.backchannelMs[account] ?? 0) + performance.now() - started
  if (path === '/token' && ctx.oidc?.params?.grant_type === 'refresh_token') {
    if (ctx.status === 200 && account) stats.refreshes[account] = (stats.refreshes[account] ?? 0) + 1
    else {
      const error = String((ctx.body as { error?: string } | undefined)?.error ?? ctx.status)
      stats.refreshErrors[error] = (stats.refreshErrors[error] ?? 0) + 1
    }
  }
}

async function handle (message: ToProvider): Promise<void> {
  if (message.type === 'start') {
    // demo/authorization-server.ts composes the provider's middleware when it starts (callback()),
    // so the timing middleware is put in at that moment, ahead of the provider's own.
    const callback = Provider.prototype.callback
    Provider.prototype.callback = function (this: Provider) {
      this.use(timing)
      return callback.call(this)
    }
    const as = await startAuthorizationServer({ clients: message.clients, accessTokenTtl: () => message.accessTokenTtlS ?? 3600, adapter: await largeMemoryAdapter() })
    provider = as.provider
    send({ type: 'started', issuer: as.issuer })
  } else if (message.type === 'mint') {
    // Real refresh tokens of the provider's own models (a grant with the scopes, as a consent makes
    // one), without a browser: what a sign-in would have left behind, for many accounts at once.
    const client = await provider!.Client.find(message.clientId)
    if (!client) throw new Error(`no client ${message.clientId}`)
    const refreshTokens: string[] = []
    for (const accountId of message.accounts) {
      const grant = new provider!.Grant({ accountId, clientId: message.clientId })
      grant.addOIDCScope(message.scope)
      const grantId = await grant.save()
      const token = new provider!.RefreshToken({ accountId, client, grantId, scope: message.scope, gty: 'authorization_code', authTime: Math.floor(Date.now() / 1000) })
      refreshTokens.push(await token.save())
    }
    send({ type: 'minted', refreshTokens })
  } else if (message.type === 'stats') {
    send({ type: 'stats', stats })
  } else {
    stats = { backchannelMs: {}, refreshes: {}, refreshErrors: {} }
    send({ type: 'reset' })
  }
}

process.on('message', (message: ToProvider) => {
  handle(message).catch((error: unknown) => send({ type: 'error', message: error instanceof Error ? error.stack ?? error.message : String(error) }))
})
process.on('disconnect', () => process.exit(0))
