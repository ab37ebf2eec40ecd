// How often a CLI of the device flow may ask whether the person has decided (RFC 8628 §3.5): every
// `interval` seconds; one that asks sooner is told `slow_down`, and its interval grows by 5 seconds
// for the rest of that code's life. oidc-provider answers `authorization_pending` without looking
// at when the CLI last asked, so the gateway keeps each device code's last poll in the store (under
// a keyed hash of the code, for as long as the code lives) and turns a pending answer that came too
// soon into `slow_down`.
// @see https://www.rfc-editor.org/rfc/rfc8628#section-3.5
import type { Clock } from '../ops/clock.js'
import type { Sealer } from '../session/seal.js'
import { firstHeld, type SessionStore } from '../store/store.js'

/** The interval the device authorization response gives, and what each `slow_down` adds (seconds). */
export const POLL_INTERVAL_S = 5

interface Polled {
  /** When the CLI last asked (ms). */
  at: number
  /** The interval it must keep now (s). */
  interval: number
}

export class DevicePolling {
  constructor (private readonly store: SessionStore, private readonly sealer: Sealer, private readonly clock: Clock, private readonly codeTtlMs: number) {}

  /**
   * The CLI asked about `deviceCode` and the person has not decided yet: the interval it broke
   * (seconds, already grown by 5 for the next polls) when it asked too soon, else undefined.
   */
  async tooSoon (deviceCode: string): Promise<number | undefined> {
    // Under the id of the secret current at its first poll (an instance before a rotation), else the current one's.
    const keys = this.sealer.idsFor('agents-device-poll', deviceCode).map((id) => `agents:device-poll:${id}`)
    const found = await firstHeld(this.store, keys)
    const [key, raw] = found === undefined ? [keys[0]!, null] : [found.key, found.value]
    const last = raw === null ? undefined : JSON.parse(raw) as Polled
    const now = this.clock.now()
    const early = last !== undefined && now - last.at < last.interval * 1000
    const interval = (last?.interval ?? POLL_INTERVAL_S) + (early ? POLL_INTERVAL_S : 0)
    const next = JSON.stringify({ at: now, interval } satisfies Polled)
    // Written only over what was read: of two polls at once, one writes and the other was too soon.
    const written = raw === null ? await this.store.claim(key, next, this.codeTtlMs) : await this.store.replace(key, Buffer.from(raw), next, this.codeTtlMs)
    if (written) return early ? interval : undefined
    return Math.max(interval, (last?.interval ?? POLL_INTERVAL_S) + POLL_INTERVAL_S)
  }
}
