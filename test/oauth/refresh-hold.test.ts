// TokenRefresher.holdingRefreshes, what a sign-in that renames a session holds while it builds the
// new one (sign-in-endpoints.ts): the refresh lock of each provider of the session that has a
// refresh token and is configured, read from the config alone (a provider whose discovery fails, or
// one no longer configured, must not stop a sign-in at another). No server.
import pino from 'pino'
import { describe, expect, it } from 'vitest'
import type { ProviderConfig } from '../../src/config/types.js'
import type { Metrics } from '../../src/ops/metrics.js'
import { Providers } from '../../src/oauth/providers.js'
import { TokenRefresher } from '../../src/oauth/refresh.js'
import { emptyRecord, withTokens, type Session } from '../../src/session/record.js'
import type { Sessions } from '../../src/session/session.js'
import { MemoryStore } from '../../src/store/memory.js'
import { storeKeys } from '../../src/store/store.js'

const log = pino({ level: 'silent' })
// Only discovery's absence matters here: this issuer answers nothing (port 9 is discard).
const PROVIDERS = {
  corp: { name: 'corp', issuer: 'http://127.0.0.1:9', timeoutMs: 2000, tokenOnly: false } as unknown as ProviderConfig,
  github: { name: 'github', timeoutMs: 2000, tokenOnly: false } as unknown as ProviderConfig,
}

function sessionWith (tokens: Record<string, { access_token: string, refresh_token?: string }>): Session {
  let record = emptyRecord(Date.now())
  for (const [name, token] of Object.entries(tokens)) record = withTokens(record, name, token)
  return { id: 'session-id', cookie: 'cookie', record }
}

describe('holdingRefreshes', () => {
  it('holds the refresh lock of each configured provider with a refresh token but the one signed in at, and releases them after', async () => {
    const store = new MemoryStore()
    // Sessions and Metrics are not used by this method.
    const refresher = new TokenRefresher(store, {} as Sessions, new Providers(PROVIDERS, log), {} as Metrics, log)
    const session = sessionWith({ corp: { access_token: 'a', refresh_token: 'r' }, github: { access_token: 'b', refresh_token: 'r' }, removed: { access_token: 'c', refresh_token: 'r' }, plain: { access_token: 'd' } })
    const heldDuring = await refresher.holdingRefreshes(session, 'github', async () => {
      const free = await Promise.all(['corp', 'github', 'removed', 'plain'].map(async (name) => {
        const lock = await store.acquire(storeKeys.refreshLock(session.id, name), 1000)
        if (lock) await store.release(lock)
        return [name, lock === null ? 'held' : 'free']
      }))
      return Object.fromEntries(free)
    })
    // corp's discovery cannot succeed (nothing answers there), and its lock was held all the same.
    expect(heldDuring).toEqual({ corp: 'held', github: 'free', removed: 'free', plain: 'free' })
    expect(await store.acquire(storeKeys.refreshLock(session.id, 'corp'), 1000)).not.toBeNull()
    await store.close()
  })
})
