// Keys derived from session.secret (and session.previousSecrets), and authenticated encryption
// bound to a bearer value (a cookie). The store only ever sees a keyed hash of a cookie and
// ciphertext sealed with a key derived from that same cookie (oauth2-proxy's "ticket" idea): a store
// dump alone reveals nothing. Each secret has a short public key id (a keyed hash of the secret,
// never the secret) that travels with what it sealed or signed, so opening costs one try, never one
// per secret; everything written is sealed with the current secret.
import { createCipheriv, createDecipheriv, createHmac, createSecretKey, hkdfSync, randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto'

/** 256 random bits, base64url: session ids, flow bindings, nonces. */
export function randomToken (): string {
  return randomBytes(32).toString('base64url')
}

/** A 32-byte key for one purpose (HKDF-SHA256 over the secret). */
export function deriveKey (secret: string, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', secret, 'oauth-gateway/v1', purpose, 32))
}

const IV_BYTES = 12
const TAG_BYTES = 16
/** The synthetic IV of {@link SealingKey.sealSmall}: 96 bits of an HMAC, which is also its tag; all it adds. */
export const SIV_BYTES = 12
/** A key id's length: 48 bits of a keyed hash, enough to tell at most five secrets apart. */
export const KEY_ID_LENGTH = 8

/** The public id of a secret: the start of a key derived from it, so it reveals nothing of it. */
export function keyIdOf (secret: string): string {
  return deriveKey(secret, 'key-id').toString('base64url').slice(0, KEY_ID_LENGTH)
}

/** Seals values to a bearer token such as a cookie value with the keys of one secret. */
export class SealingKey {
  /** The secret's public key id. */
  readonly kid: string
  /** A KeyObject once: createHmac with raw key bytes costs more per call (see docs/performance.md). */
  private readonly master: KeyObject

  constructor (private readonly secret: string) {
    this.kid = keyIdOf(secret)
    this.master = createSecretKey(deriveKey(secret, 'sealing'))
  }

  /** A key of this secret for one purpose ('state', 'flow', 'signout-state', 'logout-index'). */
  derive (purpose: string): KeyObject {
    return createSecretKey(deriveKey(this.secret, purpose))
  }

  private mac (label: string, token: string): Buffer {
    return createHmac('sha256', this.master).update(label).update('\0').update(token).digest()
  }

  /** The store id for a token: a keyed hash, so the token cannot be recovered from the store. */
  idFor (purpose: string, token: string): string {
    return this.mac(`id:${purpose}`, token).toString('base64url')
  }

  /** AES-256-GCM with a key derived from the token: iv | tag | ciphertext. Text is sealed as UTF-8. */
  sealBytes (purpose: string, token: string, plaintext: string | Uint8Array): Buffer {
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv('aes-256-gcm', this.mac(`key:${purpose}`, token), iv)
    const body = Buffer.concat([typeof plaintext === 'string' ? cipher.update(plaintext, 'utf8') : cipher.update(plaintext), cipher.final()])
    return Buffer.concat([iv, cipher.getAuthTag(), body])
  }

  /** The plaintext bytes of {@link sealBytes}' output, or null when it was sealed to another token or altered. */
  openRaw (purpose: string, token: string, raw: Uint8Array): Buffer | null {
    if (raw.length < IV_BYTES + TAG_BYTES) return null
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.mac(`key:${purpose}`, token), raw.subarray(0, IV_BYTES))
      decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES))
      return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()])
    } catch {
      return null
    }
  }

  /** {@link openRaw} as UTF-8 text. */
  openBytes (purpose: string, token: string, raw: Uint8Array): string | null {
    return this.openRaw(purpose, token, raw)?.toString('utf8') ?? null
  }

  /**
   * Sealed in as few bytes as can be: 12 more than the plaintext, where {@link sealBytes} adds 28. For
   * values that must stay small (a Redis ranked set keeps members of up to 64 bytes in its compact
   * form). A synthetic IV (SIV, RFC 5297's construction with HMAC-SHA256 in place of CMAC): the
   * first 96 bits of an HMAC of the plaintext are the IV of AES-256-CTR and the tag, both keys
   * derived from the token. Deterministic: the same plaintext sealed to the same token gives the same
   * bytes, so it suits values that are unique anyway (a session id) and no others.
   */
  sealSmall (purpose: string, token: string, plaintext: Uint8Array): Buffer {
    const siv = createHmac('sha256', this.mac(`siv-mac:${purpose}`, token)).update(plaintext).digest().subarray(0, SIV_BYTES)
    const cipher = createCipheriv('aes-256-ctr', this.mac(`siv-enc:${purpose}`, token), Buffer.concat([siv, Buffer.alloc(16 - SIV_BYTES)]))
    return Buffer.concat([siv, cipher.update(plaintext), cipher.final()])
  }

  /** The plaintext of {@link sealSmall}'s output, or null when it was sealed to another token or altered. */
  openSmall (purpose: string, token: string, raw: Uint8Array): Buffer | null {
    if (raw.length < SIV_BYTES) return null
    const siv = raw.subarray(0, SIV_BYTES)
    const decipher = createDecipheriv('aes-256-ctr', this.mac(`siv-enc:${purpose}`, token), Buffer.concat([siv, Buffer.alloc(16 - SIV_BYTES)]))
    const plaintext = Buffer.concat([decipher.update(raw.subarray(SIV_BYTES)), decipher.final()])
    const expected = createHmac('sha256', this.mac(`siv-mac:${purpose}`, token)).update(plaintext).digest().subarray(0, SIV_BYTES)
    return timingSafeEqual(expected, siv) ? plaintext : null
  }

  /** {@link sealBytes} as base64url text, for values kept as text. */
  seal (purpose: string, token: string, plaintext: string): string {
    return this.sealBytes(purpose, token, plaintext).toString('base64url')
  }

  /** The plaintext of {@link seal}'s output, or null. */
  open (purpose: string, token: string, sealed: string): string | null {
    return this.openBytes(purpose, token, Buffer.from(sealed, 'base64url'))
  }
}

/**
 * The keys of `session.secret` (current: every write) and of `session.previousSecrets` (opening
 * only), found by key id. {@link seal} and {@link idFor} use the current one; {@link open} opens what
 * any of them sealed, and {@link idsFor} names where a record written under any of them is kept,
 * so that what the agents' server keeps by a keyed id (clients, grants, tokens) is found through a
 * rotation (an outside tester's finding: an instance at step 2 found none of what step 1 made).
 */
export class Sealer {
  /** The current secret's keys: everything written is sealed or signed with these. */
  readonly current: SealingKey
  /** Every secret's keys, current first. */
  readonly keys: readonly SealingKey[]
  private readonly byId: ReadonlyMap<string, SealingKey>

  constructor (secret: string, previousSecrets: readonly string[] = []) {
    this.keys = [secret, ...previousSecrets].map((each) => new SealingKey(each))
    this.current = this.keys[0]!
    this.byId = new Map(this.keys.map((key) => [key.kid, key]))
    // Distinct secrets (the config refuses repeats) with one id would open nothing of one of them.
    if (this.byId.size !== this.keys.length) throw new Error('two session secrets have the same key id: the secrets must differ')
  }

  /** The keys of the secret with this id, or undefined (an unknown or retired secret). */
  key (kid: string): SealingKey | undefined {
    return this.byId.get(kid)
  }

  idFor (purpose: string, token: string): string {
    return this.current.idFor(purpose, token)
  }

  /** {@link idFor} under every secret, the current one first. */
  idsFor (purpose: string, token: string): string[] {
    return this.keys.map((key) => key.idFor(purpose, token))
  }

  sealBytes (purpose: string, token: string, plaintext: string): Buffer {
    return this.current.sealBytes(purpose, token, plaintext)
  }

  /** What any of the secrets sealed (the current one tried first), or null. */
  openBytes (purpose: string, token: string, raw: Uint8Array): string | null {
    for (const key of this.keys) {
      const plaintext = key.openBytes(purpose, token, raw)
      if (plaintext !== null) return plaintext
    }
    return null
  }

  seal (purpose: string, token: string, plaintext: string): string {
    return this.current.seal(purpose, token, plaintext)
  }

  open (purpose: string, token: string, sealed: string): string | null {
    return this.openBytes(purpose, token, Buffer.from(sealed, 'base64url'))
  }

  /** {@link seal} with the current key, its key id in front (`<kid>.<sealed>`): what {@link openNamed} opens in one try. */
  sealNamed (purpose: string, token: string, plaintext: string): string {
    return `${this.current.kid}.${this.current.seal(purpose, token, plaintext)}`
  }

  /** The plaintext of {@link sealNamed}'s output and the key that opened it, or null (no key id, a secret no longer held, altered). */
  openNamed (purpose: string, token: string, value: string): { plaintext: string, key: SealingKey } | null {
    const dot = value.indexOf('.')
    const key = dot === -1 ? undefined : this.key(value.slice(0, dot))
    const plaintext = key?.open(purpose, token, value.slice(dot + 1)) ?? null
    return key && plaintext !== null ? { plaintext, key } : null
  }
}

/** Whether two texts are the same, in time that does not tell how much of them is (a CSRF token compared with the one expected). */
export function sameText (a: string, b: string): boolean {
  const left = Buffer.from(a)
  const right = Buffer.from(b)
  return left.length === right.length && timingSafeEqual(left, right)
}
