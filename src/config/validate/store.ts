// The `store` section: one of url, cluster or sentinel.
import type { SentinelConfig, StoreConfig } from '../types.js'
import { Issues, checkUrl, type Path } from '../problems.js'
import { type Sections, duration, url } from './values.js'

function validateSentinel (issues: Issues, raw: NonNullable<Sections['store']['sentinel']>): SentinelConfig {
  const at = (key: string): Path => ['store', 'sentinel', key]
  // A user without a password is never sent (AUTH needs both): the nodes would refuse the gateway.
  for (const [user, password] of [['username', 'password'], ['sentinelUsername', 'sentinelPassword']] as const) {
    if (raw[user] !== undefined && raw[password] === undefined && !issues.touched(at(password))) issues.add(at(password), `is required with ${user}`)
  }
  return {
    name: raw.name ?? '',
    nodes: raw.nodes ?? [],
    username: raw.username,
    password: raw.password,
    sentinelUsername: raw.sentinelUsername,
    sentinelPassword: raw.sentinelPassword,
    tls: raw.tls,
  }
}

export function validateStore (issues: Issues, raw: Sections['store']): StoreConfig {
  const type = raw.type
  const storeUrl = url(issues, ['store', 'url'], raw.url, ['redis', 'rediss'])
  const cluster = raw.cluster?.flatMap((item, i) => {
    const checked = checkUrl(issues, ['store', 'cluster', i], item, ['redis', 'rediss'])
    return checked ? [checked] : []
  })
  const sentinel = raw.sentinel && validateSentinel(issues, raw.sentinel)
  const given = (['url', 'cluster', 'sentinel'] as const).filter((form) => raw[form] !== undefined || issues.touched(['store', form]))
  if (type === 'redis' && given.length > 1) issues.add(['store'], `give only one of url, cluster or sentinel (got ${given.join(' and ')})`)
  return {
    type,
    // Only type redis has one, so the schema only describes it (defaultText).
    url: type === 'redis' && given.length === 0 ? 'redis://127.0.0.1:6379/0' : storeUrl,
    cluster,
    sentinel,
    keyPrefix: raw.keyPrefix,
    timeoutMs: duration(issues, ['store', 'timeout'], raw.timeout, 50, 30_000),
    readiness: raw.readiness,
    // A Sentinel or Cluster form has replicas by design; a single URL may have none. true is one replica.
    waitForReplica: Number(raw.waitForReplica ?? (sentinel !== undefined || cluster !== undefined)),
  }
}

/** The passwords the store's configuration holds (its URLs' and Sentinel's): secrets another key must not reuse. */
export function storePasswords (store: StoreConfig): string[] {
  // ioredis reads a password from the userinfo and from `?password=` (a re-reading's finding).
  const fromUrl = (text: string): string[] => {
    try {
      const url = new URL(text)
      return [url.password === '' ? undefined : decodeURIComponent(url.password), url.searchParams.get('password') ?? undefined].filter((value): value is string => value !== undefined && value !== '')
    } catch {
      return []
    }
  }
  const urls = [...(store.url === undefined ? [] : [store.url]), ...(store.cluster ?? [])]
  return [...urls.flatMap(fromUrl), ...[store.sentinel?.password, store.sentinel?.sentinelPassword].filter((value): value is string => value !== undefined)]
}
