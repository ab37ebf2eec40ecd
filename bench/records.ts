// Session records written straight into Redis with the gateway's own sealing code
// (src/session/seal.ts), exactly as src/session/session.ts writes them: key `<keyPrefix>session:<id>`
// where id is the keyed hash of the cookie, value the record's JSON sealed to the cookie, in the store's binary format. Used to
// create thousands of signed-in sessions in a second (refresh storm) and to fill Redis with real-shaped
// records (session bytes), where signing in through the provider thousands of times would take minutes.
import { randomBytes } from 'node:crypto'
import { Redis } from 'ioredis'
import { Sealer } from '../src/session/seal.js'
import { type SessionRecord } from '../src/session/session.js'
import { SESSION_PURPOSE, decodeRecord, encodeRecord, newCookie } from '../src/session/sealed-record.js'
import { storeKeys } from '../src/store/store.js'
import { BENCH_SESSION_SECRET } from './targets.js'

/** store.keyPrefix's default, which the bench's gateways use. */
export const KEY_PREFIX = 'gw:'

export const sealer = new Sealer(BENCH_SESSION_SECRET)

/** The store id of the session behind `cookie`. */
export const sessionId = (cookie: string) => sealer.idFor(SESSION_PURPOSE, cookie)

/** The Redis key (with the prefix) of the session behind `cookie`. */
export const sessionKey = (cookie: string) => `${KEY_PREFIX}${storeKeys.session(sessionId(cookie))}`

export const sealRecord = (cookie: string, record: SessionRecord) => encodeRecord(sealer, cookie, record)

export const openRecord = (cookie: string, stored: Buffer) => decodeRecord(sealer, cookie, stored)

/** Random characters of the token alphabet (base64url), `length` long: a stand-in of a token's size. */
export const randomText = (length: number) => randomBytes(Math.ceil(length * 3 / 4) + 1).toString('base64url').slice(0, length)

/** Writes `count` sessions made by `make(i)` in pipelined batches (under `reuse[i]`'s cookie if given); returns their cookies. */
export async function writeSessions (redisUrl: string, count: number, ttlMs: number, make: (i: number) => SessionRecord, reuse?: string[]): Promise<string[]> {
  const redis = new Redis(redisUrl)
  try {
    const cookies: string[] = []
    for (let start = 0; start < count; start += 1000) {
      const batch = redis.pipeline()
      for (let i = start; i < Math.min(count, start + 1000); i++) {
        const cookie = reuse?.[i] ?? newCookie(sealer)
        cookies.push(cookie)
        batch.set(sessionKey(cookie), sealRecord(cookie, make(i)), 'PX', ttlMs)
      }
      await batch.exec()
    }
    return cookies
  } finally {
    redis.disconnect()
  }
}
