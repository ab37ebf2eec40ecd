// The sign-in state across a secret rotation: its JWS header names the key id of the secret that
// signed it, from a fixed set of accepted headers checked before any MAC; the flow binding, PKCE
// verifier and nonce use that secret's flow key, so a sign-in begun under [s1] completes under
// [s2, previous s1] with the same verifier and nonce, and not under [s2]. No sockets: Flows over
// the in-process store, time from a fixed clock.
import { createHmac, createSecretKey, type KeyObject } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import { openState, signState, stateKey, stateKeyring, type StateKey, type StateKeyring } from '../../src/oauth/signed-state.js'
import { Flows, pkceChallenge } from '../../src/oauth/state.js'
import { deriveKey, keyIdOf, Sealer } from '../../src/session/seal.js'
import { MemoryStore } from '../../src/store/memory.js'

const S1 = 'state-key-secret-one-0123456789-abcdefghij'
const S2 = 'state-key-secret-two-9876543210-zyxwvutsrq'
const NOW = Date.UTC(2031, 0, 1)
const clock = { now: () => NOW }
const FLOW = { provider: 'demo', next: '/app/', pkce: true, openid: true }

const stores: MemoryStore[] = []
afterEach(async () => { for (const store of stores.splice(0)) await store.close() })

function flows (store: MemoryStore, secrets: string[]): Flows {
  return new Flows(store, new Sealer(secrets[0]!, secrets.slice(1)), 300_000, clock)
}

function newStore (): MemoryStore {
  const store = new MemoryStore({ clock })
  stores.push(store)
  return store
}

const header = (state: string) => JSON.parse(Buffer.from(state.split('.')[0]!, 'base64url').toString()) as unknown

describe('a sign-in across a secret rotation', () => {
  it('begun under [s1], completes under [s2, previous s1] with the same verifier and nonce', async () => {
    const store = newStore()
    const begun = await flows(store, [S1]).begin(undefined, FLOW)
    expect(header(begun.state)).toEqual({ alg: 'HS256', kid: keyIdOf(S1) })
    const done = await flows(store, [S2, S1]).complete(begun.state, 'demo', begun.cookie, FLOW)
    expect(pkceChallenge(done.verifier!)).toBe(begun.codeChallenge)
    expect(done.nonce).toBe(begun.nonce)
  })

  it('begun under [s2, previous s1], is signed with s2 and completes under [s2]', async () => {
    const store = newStore()
    const begun = await flows(store, [S2, S1]).begin(undefined, FLOW)
    expect(header(begun.state)).toEqual({ alg: 'HS256', kid: keyIdOf(S2) })
    const done = await flows(store, [S2]).complete(begun.state, 'demo', begun.cookie, FLOW)
    expect(done.nonce).toBe(begun.nonce)
  })

  it('begun under [s1], is invalid_state under [s2] (s1 given up)', async () => {
    const store = newStore()
    const begun = await flows(store, [S1]).begin(undefined, FLOW)
    await expect(flows(store, [S2]).complete(begun.state, 'demo', begun.cookie, FLOW)).rejects.toMatchObject({ code: 'invalid_state', cause: new Error('the state is invalid') })
  })
})

describe('the accepted state headers', () => {
  const s1 = stateKey(keyIdOf(S1), createSecretKey(deriveKey(S1, 'state')))
  const s2 = stateKey(keyIdOf(S2), createSecretKey(deriveKey(S2, 'state')))
  const claims = { p: 'demo' }
  const encode = (value: string) => Buffer.from(value).toString('base64url')

  /** The ring [s2, previous s1], counting each time a key's bytes are taken for a MAC. */
  function counted (): { ring: StateKeyring, macs: () => number } {
    let macs = 0
    const ring = new Map([...stateKeyring([s2, s1])].map(([name, key]): [string, StateKey] => [name, { ...key, get key () { macs++; return key.key } }]))
    return { ring, macs: () => macs }
  }

  /** A token with `rawHeader` as its header, correctly signed with `key`: only the header decides. */
  function withHeader (rawHeader: string, key: KeyObject = s1.key): string {
    const payload = signState(s1, claims, 300_000, NOW).split('.')[1]!
    const input = `${encode(rawHeader)}.${payload}`
    return `${input}.${createHmac('sha256', key).update(input).digest('base64url')}`
  }

  it('each held secret\'s header opens with that key', () => {
    const { ring, macs } = counted()
    expect(openState(ring, signState(s1, claims, 300_000, NOW), NOW)).toMatchObject({ ok: true, kid: keyIdOf(S1) })
    expect(openState(ring, signState(s2, claims, 300_000, NOW), NOW)).toMatchObject({ ok: true, kid: keyIdOf(S2) })
    expect(macs()).toBe(2)
  })

  it.each<[string, () => string]>([
    ['a kid no secret has', () => withHeader('{"alg":"HS256","kid":"AAAAAAAA"}')],
    ['no kid, as the builds before 1.0.0 wrote (signed with the current secret s2)', () => withHeader('{"alg":"HS256"}', s2.key)],
    ['the members reordered', () => withHeader(`{"kid":"${keyIdOf(S1)}","alg":"HS256"}`)],
    ['a space after the colon', () => withHeader(`{"alg": "HS256","kid":"${keyIdOf(S1)}"}`)],
    ['alg none', () => withHeader(`{"alg":"none","kid":"${keyIdOf(S1)}"}`)],
    ['alg HS512', () => withHeader(`{"alg":"HS512","kid":"${keyIdOf(S1)}"}`)],
    ['a crit member', () => withHeader(`{"alg":"HS256","kid":"${keyIdOf(S1)}","crit":["exp"]}`)],
    ['a typ member', () => withHeader(`{"alg":"HS256","kid":"${keyIdOf(S1)}","typ":"JWT"}`)],
    ['the kid twice', () => withHeader(`{"alg":"HS256","kid":"AAAAAAAA","kid":"${keyIdOf(S1)}"}`)],
    ['a kid as a number', () => withHeader('{"alg":"HS256","kid":1}')],
    ['a jku member', () => withHeader(`{"alg":"HS256","kid":"${keyIdOf(S1)}","jku":"https://evil.example/jwks"}`)],
    ['the header padded with =', () => signState(s1, claims, 300_000, NOW).replace('.', '=.')],
  ])('%s: invalid, and no MAC computed', (_case, token) => {
    const { ring, macs } = counted()
    expect(openState(ring, token(), NOW)).toEqual({ ok: false, reason: 'invalid' })
    expect(macs()).toBe(0)
  })

  it.each<[string, () => string]>([
    ["s1's kid, signed with s2", () => withHeader(`{"alg":"HS256","kid":"${keyIdOf(S1)}"}`, s2.key)],
  ])('%s: invalid after one MAC', (_case, token) => {
    const { ring, macs } = counted()
    expect(openState(ring, token(), NOW)).toEqual({ ok: false, reason: 'invalid' })
    expect(macs()).toBe(1)
  })
})
