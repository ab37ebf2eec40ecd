// store.keyPrefix and an ending's unsettled mark (RedisStore.end: one script of the key's DEL and
// the mark's SET, one Redis Cluster slot): the mark is a hash tag of the key's whole name, and ioredis
// puts the prefix before both. A prefix whose braces would give the mark another slot than its key
// is refused at start and by --check, naming the key; one that is a hash tag (`{gw}:`, every key in
// one slot) is taken. The slots themselves, asked of a real cluster, are in replica-wait.test.ts.
import { describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/config.js'

const keyPrefix = (value: string) => parseConfig(`store:\n  type: redis\n  keyPrefix: ${JSON.stringify(value)}\n`, {}).store.keyPrefix

describe('store.keyPrefix', () => {
  // Each would put the mark in another slot than its key (Redis hashes the whole key for an empty
  // tag or an unclosed one, and the mark's own tag for a prefix without one).
  it.each([
    ['a stray closing brace', 'gw}:'],
    ['an opening brace never closed', 'gw{'],
    ['an empty tag, which Redis ignores', 'gw:{}:'],
    ['an empty tag before a real one', '{}{gw}:'],
  ])('refuses a prefix with %s (%s), naming the key', (_name, value) => {
    expect(() => keyPrefix(value)).toThrow(/store\.keyPrefix: must be a prefix without \{ or \}, or whose first \{ opens a Redis Cluster hash tag/)
  })

  it.each([['gw:'], ['prod/gw:'], ['ゲートウェイ:'], ['{gw}:'], ['gw:{tenant-a}:'], ['}{gw}:'], ['{g{w}:']])('takes the prefix %s', (value) => {
    expect(keyPrefix(value)).toBe(value)
  })
})
