// Keys derived from session.secret, and authenticated encryption bound to a bearer value (a
// cookie). The store only ever sees a keyed hash of a cookie and ciphertext sealed with a key
// derived from that same cookie (oauth2-proxy's "ticket" idea): a store dump alone reveals nothing.
import { createCipheriv, createDecipheriv, createHmac, createSecretKey, hkdfSync, randomBytes, type KeyObject } from 'node:crypto'

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

/** Seals values to a bearer token such as a cookie value; one instance per secret. */
export class Sealer {
  /** A KeyObject once: createHmac with raw key bytes costs more per call (see docs/performance.md). */
  private readonly master: KeyObject

  constructor (secret: string) {
    this.master = createSecretKey(deriveKey(secret, 'sealing'))
  }

  private mac (label: string, token: string): Buffer {
    return createHmac('sha256', this.master).update(label).update('\0').update(token).digest()
  }

  /** The store id for a token: a keyed hash, so the token cannot be recovered from the store. */
  idFor (purpose: string, token: string): string {
    return this.mac(`id:${purpose}`, token).toString('base64url')
  }

  /** AES-256-GCM with a key derived from the token: iv | tag | ciphertext. */
  sealBytes (purpose: string, token: string, plaintext: string): Buffer {
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv('aes-256-gcm', this.mac(`key:${purpose}`, token), iv)
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()])
    return Buffer.concat([iv, cipher.getAuthTag(), body])
  }

  /** The plaintext of {@link sealBytes}' output, or null when it was sealed to another token or altered. */
  openBytes (purpose: string, token: string, raw: Uint8Array): string | null {
    if (raw.length < IV_BYTES + TAG_BYTES) return null
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.mac(`key:${purpose}`, token), raw.subarray(0, IV_BYTES))
      decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES))
      return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8')
    } catch {
      return null
    }
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
