// The sign-in state across a secret rotation: its JWS header names the key id of the secret that
// signed it, from a fixed set of accepted headers checked before any MAC; the flow binding, PKCE
// verifier and nonce use that secret's flow key, so a sign-in begun under [s1] completes under
// [s2, previous s1] with the same verifier and nonce, and not under [s2]. No sockets: Flows over
// the in-process store, time from a fixed clock.
import { createHmac, createSecretKey, type KeyObject } from 'node:crypto'
import { afterEach, describe, expect, it } from 'vitest'
import { openState, signState, stateKey, stateKeyring, type StateKey, type StateKeyring } from '../../src/oauth/signed-state.js'
import { Flows, formatFlowCookie, parseFlowCookie, pkceChallenge } from '../../src/oauth/state.js'
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

describe('the flow cookie\'s sequence', () => {
  // An outside tester's point: a planted cookie at the largest sequence made the gateway write a
  // 16-digit one it could not read back, and the sign-in it had just started failed.
  it('starts a binding of its own after the largest sequence, and that sign-in completes', async () => {
    const store = newStore()
    const planted = parseFlowCookie(`${'a'.repeat(43)}.999999999999999`)!
    const begun = await flows(store, [S1]).begin(planted, FLOW)
    expect(begun.cookie.binding).not.toBe(planted.binding)
    expect(begun.cookie.sequence).toBe(1)
    const sent = parseFlowCookie(formatFlowCookie(begun.cookie))
    expect(sent).toEqual(begun.cookie)
    expect((await flows(store, [S1]).complete(begun.state, 'demo', sent, FLOW)).next).toBe('/app/')
  })
})

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

describe('what the state seals (where the sign-in goes back to, the kept form, the agent interaction)', () => {
  const s1 = stateKey(keyIdOf(S1), createSecretKey(deriveKey(S1, 'state')))
  const payloadOf = (state: string) => JSON.parse(Buffer.from(state.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>

  it('is unreadable in the state and comes back whole at the callback, across a rotation too', async () => {
    const store = newStore()
    const flow = { ...FLOW, next: '/app/cb?code=secret-code&reset=secret-reset', form: 'form-binding-123', agent: 'agent-interaction-456' }
    const begun = await flows(store, [S1]).begin(undefined, flow)
    const seen = Buffer.from(begun.state.split('.')[1]!, 'base64url').toString()
    for (const value of ['secret-code', 'secret-reset', '/app/cb', 'form-binding-123', 'agent-interaction-456']) expect(seen).not.toContain(value)
    expect(await flows(store, [S2, S1]).complete(begun.state, 'demo', begun.cookie, flow)).toMatchObject({ next: flow.next, form: flow.form, agent: flow.agent })
  })

  it('a state 1.0.0 signed, with them in the clear, still completes within its lifetime after an upgrade', async () => {
    const store = newStore()
    const begun = await flows(store, [S1]).begin(undefined, FLOW)
    const { x: _sealed, ...claims } = payloadOf(begun.state)
    const older = signState(s1, { ...claims, next: '/app/older', f: 'form-1' }, 300_000, NOW)
    expect(await flows(store, [S1]).complete(older, 'demo', begun.cookie, FLOW)).toMatchObject({ next: '/app/older', form: 'form-1' })
  })

  it('one sealed to another state\'s id, or with another secret, is invalid', async () => {
    const store = newStore()
    const first = await flows(store, [S1]).begin(undefined, FLOW)
    const second = await flows(store, [S1]).begin(first.cookie, FLOW)
    const moved = signState(s1, { ...payloadOf(first.state), x: payloadOf(second.state).x }, 300_000, NOW)
    await expect(flows(store, [S1]).complete(moved, 'demo', second.cookie, FLOW)).rejects.toMatchObject({ code: 'invalid_state', cause: new Error('the state is invalid') })
    const elsewhere = await flows(newStore(), [S2]).begin(undefined, FLOW)
    const foreign = signState(s1, { ...payloadOf(first.state), x: payloadOf(elsewhere.state).x }, 300_000, NOW)
    await expect(flows(store, [S1]).complete(foreign, 'demo', first.cookie, FLOW)).rejects.toMatchObject({ code: 'invalid_state', cause: new Error('the state is invalid') })
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
