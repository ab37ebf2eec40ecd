// The demo's authorization server keeps everything in memory, on purpose: a restart forgets its
// sign-ins, grants and tokens, and nothing is written to disk. oidc-provider's own quick-start
// adapter does the same but warns on every start that production must change it; the demo says
// once, in its own words, that it keeps its state in memory (demo/instructions.ts). This one keeps
// that adapter's behaviour: a Session is also found by its uid, a device code by its user code, and
// a grant's revocation removes what was issued under it.
// @see https://github.com/panva/node-oidc-provider/blob/main/example/my_adapter.js
import type { Adapter, AdapterPayload } from 'oidc-provider'

/** At most this many records are kept: past it, the oldest go first (a long sign-in storm stays bounded). */
const MAX_RECORDS = 20_000
/** The models issued under a grant, which its revocation removes. */
const GRANTABLE = new Set(['AccessToken', 'AuthorizationCode', 'RefreshToken', 'DeviceCode', 'BackchannelAuthenticationRequest'])

interface Held { readonly model: string, readonly payload: AdapterPayload, readonly expiresAt: number }

/** One authorization server's storage: every model's records in one map, by `<model>:<id>`. */
export function memoryAdapter (): new (model: string) => Adapter {
  const records = new Map<string, Held>()
  /** Secondary names of a record: `uid:<session uid>`, `userCode:<code>`, to its key. */
  const names = new Map<string, string>()

  const namesOf = (held: Held): string[] => [
    ...(held.model === 'Session' && held.payload.uid !== undefined ? [`uid:${held.payload.uid}`] : []),
    ...(held.payload.userCode !== undefined ? [`userCode:${held.payload.userCode}`] : []),
  ]
  function remove (key: string): void {
    const held = records.get(key)
    if (held === undefined) return
    records.delete(key)
    for (const name of namesOf(held)) if (names.get(name) === key) names.delete(name)
  }
  function live (key: string | undefined): AdapterPayload | undefined {
    const held = key === undefined ? undefined : records.get(key)
    if (held === undefined) return undefined
    if (held.expiresAt > Date.now()) return held.payload
    remove(key!)
    return undefined
  }

  return class MemoryAdapter implements Adapter {
    constructor (private readonly model: string) {}

    private key (id: string): string { return `${this.model}:${id}` }

    async upsert (id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
      const key = this.key(id)
      remove(key)
      const held = { model: this.model, payload, expiresAt: expiresIn === undefined ? Infinity : Date.now() + expiresIn * 1000 }
      records.set(key, held)
      for (const name of namesOf(held)) names.set(name, key)
      for (const oldest of records.keys()) {
        if (records.size <= MAX_RECORDS) break
        remove(oldest)
      }
    }

    async find (id: string): Promise<AdapterPayload | undefined> { return live(this.key(id)) }
    async findByUid (uid: string): Promise<AdapterPayload | undefined> { return live(names.get(`uid:${uid}`)) }
    async findByUserCode (userCode: string): Promise<AdapterPayload | undefined> { return live(names.get(`userCode:${userCode}`)) }

    async consume (id: string): Promise<void> {
      const payload = live(this.key(id))
      if (payload !== undefined) payload.consumed = Math.floor(Date.now() / 1000)
    }

    async destroy (id: string): Promise<void> { remove(this.key(id)) }

    async revokeByGrantId (grantId: string): Promise<void> {
      for (const [key, held] of records) if (GRANTABLE.has(held.model) && held.payload.grantId === grantId) remove(key)
    }
  }
}
