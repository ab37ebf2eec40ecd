// The store's Lua scripts: where a method must compare and then act on one key (releasing a lock,
// a conditional write, the sets), or on a key and its ending's mark in the same slot, one script
// runs it atomically. Defined on each connection with
// defineCommand (EVALSHA, EVAL on NOSCRIPT).
import type { Cluster, Redis, Result } from 'ioredis'

/**
 * Deletes KEYS[1] only while it holds ARGV[1] (the owner's token): 1 when deleted, else 0. One key,
 * so it runs on the node owning that key's slot in a Redis Cluster too.
 */
const RELEASE_LOCK = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
/**
 * SET KEYS[1] ARGV[2] PX ARGV[3] only while it holds exactly ARGV[1] (byte for byte): 1 when set,
 * else 0. An absent key is never created (GET of it is false, which equals no string).
 */
export const REPLACE = "if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 else return 0 end"
/**
 * DEL KEYS[1], and only when it was there, SET KEYS[2] (its unsettled mark, in its slot) for ARGV[1]
 * ms: 1 when deleted, else 0. Both or neither; a key already gone writes nothing (an attacker's
 * finding: a MULTI marked every sign-in's stale cookie, and each then waited for a replica).
 */
const END_MARKED = "if redis.call('del', KEYS[1]) == 1 then redis.call('set', KEYS[2], '1', 'PX', ARGV[1]) return 1 end return 0"
/** The key expires within ARGV[1] ms at the latest (a key without expiry gets one); never later than it would. */
const CAP_EXPIRY = "local left = redis.call('pttl', KEYS[1]) if left == -2 then return 0 end if left == -1 or left > tonumber(ARGV[1]) then redis.call('pexpire', KEYS[1], ARGV[1]) end return 1"
/**
 * PEXPIRE ARGV[1] only when it lengthens the key's life (a key without expiry counts as shorter:
 * PTTL -1): 1, or 0 when there is no such key.
 */
const GROW_EXPIRY = "local left = redis.call('pttl', KEYS[1]) if left == -2 then return 0 end if left < tonumber(ARGV[1]) then redis.call('pexpire', KEYS[1], ARGV[1]) end return 1"
/** SADD ARGV[1], then the set's expiry grown to ARGV[2] ms as GROW_EXPIRY grows it: the set's size. */
const ADD_MEMBER = "redis.call('sadd', KEYS[1], ARGV[1]) local left = redis.call('pttl', KEYS[1]) if left < tonumber(ARGV[2]) then redis.call('pexpire', KEYS[1], ARGV[2]) end return redis.call('scard', KEYS[1])"
/**
 * ZADD ARGV[1] (member) with score ARGV[2], the expiry grown to ARGV[3], then only the ARGV[4]
 * highest-scored members kept besides ARGV[5] (none when empty), which, while there, is neither
 * counted nor removed: the ones removed are returned (lowest first).
 */
const ADD_RANKED = "redis.call('zadd', KEYS[1], ARGV[2], ARGV[1]) " +
  "local left = redis.call('pttl', KEYS[1]) if left < tonumber(ARGV[3]) then redis.call('pexpire', KEYS[1], ARGV[3]) end " +
  "local kept = tonumber(ARGV[4]) if ARGV[5] ~= '' and redis.call('zscore', KEYS[1], ARGV[5]) then kept = kept + 1 end " +
  "local over = redis.call('zcard', KEYS[1]) - kept if over <= 0 then return {} end " +
  "local dropped = {} for _, member in ipairs(redis.call('zrange', KEYS[1], 0, over)) do " +
  'if #dropped < over and member ~= ARGV[5] then dropped[#dropped + 1] = member end end ' +
  "redis.call('zrem', KEYS[1], unpack(dropped)) return dropped"
/**
 * ZADD ARGV[1] with score ARGV[2] and the expiry grown as ADD_RANKED does, only when the set then
 * holds at most ARGV[4] members (a member already there is only re-scored): 1, else 0 and nothing changed.
 */
const ADD_RANKED_IF_ROOM = "if not redis.call('zscore', KEYS[1], ARGV[1]) and redis.call('zcard', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end " +
  "redis.call('zadd', KEYS[1], ARGV[2], ARGV[1]) " +
  "local left = redis.call('pttl', KEYS[1]) if left < tonumber(ARGV[3]) then redis.call('pexpire', KEYS[1], ARGV[3]) end return 1"

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** RELEASE_LOCK, defined on each connection with defineCommand (EVALSHA, EVAL on NOSCRIPT). */
    releaseLock (key: string, owner: string): Result<number, Context>
    /** REPLACE: a write conditional on the value read. */
    replaceValue (key: string, expected: Buffer, value: string | Buffer, ttlMs: number): Result<number, Context>
    /** END_MARKED: an ending's delete and its unsettled mark. */
    endMarked (key: string, mark: string, ttlMs: number): Result<number, Context>
    /** CAP_EXPIRY: a key's expiry brought nearer, never further. */
    capExpiry (key: string, ttlMs: number): Result<number, Context>
    /** GROW_EXPIRY, ADD_MEMBER: the Sets role's writes, one script on one key each. */
    growExpiry (key: string, ttlMs: number): Result<number, Context>
    addMember (key: string, member: string, ttlMs: number): Result<number, Context>
    /** ADD_RANKED: the ranked sets' bounded add. */
    addRanked (key: string, member: Buffer, score: number, ttlMs: number, max: number, exempt: Buffer): Result<string[], Context>
    /** The same, with the dropped members as bytes (ioredis defines the Buffer form of each command). */
    addRankedBuffer (key: string, member: Buffer, score: number, ttlMs: number, max: number, exempt: Buffer): Result<Buffer[], Context>
    /** ADD_RANKED_IF_ROOM: the add only within the bound. */
    addRankedIfRoom (key: string, member: Buffer, score: number, ttlMs: number, max: number): Result<number, Context>
  }
}

/** Defines every script on `redis` as a command of its own. */
export function defineScripts (redis: Redis | Cluster): void {
  redis.defineCommand('releaseLock', { numberOfKeys: 1, lua: RELEASE_LOCK })
  redis.defineCommand('replaceValue', { numberOfKeys: 1, lua: REPLACE })
  redis.defineCommand('endMarked', { numberOfKeys: 2, lua: END_MARKED })
  redis.defineCommand('capExpiry', { numberOfKeys: 1, lua: CAP_EXPIRY })
  redis.defineCommand('growExpiry', { numberOfKeys: 1, lua: GROW_EXPIRY })
  redis.defineCommand('addMember', { numberOfKeys: 1, lua: ADD_MEMBER })
  redis.defineCommand('addRanked', { numberOfKeys: 1, lua: ADD_RANKED })
  redis.defineCommand('addRankedIfRoom', { numberOfKeys: 1, lua: ADD_RANKED_IF_ROOM })
}
