// A session renamed by a sign-in (one that adds a provider or steps up gets a new id and cookie,
// Sessions.start) leaves its old id pointing at the new id for a minute. A sign-out that comes with
// the old cookie (another tab's, sent before the browser had the new one) then ends the renamed
// session too, where it found nothing before and the sign-in's answer, arriving last, signed the
// browser in again. The pointer is only ever followed to end a session, never to read one: the old
// cookie opens nothing, and learns nothing of the new session (not its record, tokens or ID token).
import type { KeyValue, Lock } from '../store/store.js'
import { refusedByStore, storeKeys } from '../store/store.js'

/** How long an old id points at the new one: far longer than a request in flight takes. */
export const RENAME_POINTER_MS = 60_000
/** A chain of renames within that minute is followed this far. */
const MAX_HOPS = 4

export class Renames {
  constructor (private readonly store: KeyValue & Lock) {}

  /**
   * Ends the old session's record, its id pointing at `newId` from just before: there is no
   * moment when a sign-out finds neither. False when it was not there (renamed or ended meanwhile):
   * the pointer is taken back, and that cookie gets no say over the new session. The pointer is
   * only set where none is (a later sign-in with the same old cookie, which finds its record
   * gone, neither replaces nor deletes the pointer of the sign-in that renamed it), and taken back
   * only while it is this sign-in's (compare-and-delete); the sign-in that did take the record
   * sets it whatever another left there.
   */
  async rename (oldId: string, newId: string): Promise<boolean> {
    const key = storeKeys.renamed(oldId)
    const claimed = await this.store.claim(key, newId, RENAME_POINTER_MS)
    if (await this.taken(oldId)) {
      // The old session is gone now: the sign-in stands, whatever becomes of this write.
      if (!claimed) await this.store.set(key, newId, RENAME_POINTER_MS).catch(() => {})
      return true
    }
    if (claimed) await this.store.release({ key, owner: newId }).catch(() => {})
    return false
  }

  /**
   * Whether the old session's record was there to end (KeyValue.end: marked unsettled with its
   * delete, so that a sign-out with the old cookie waits for a replica). An end whose answer did
   * not come (store.timeout, a dropped connection) may have run: the old record may be gone, so
   * the sign-in must stand, or the browser would be signed out by a store fault (an outside
   * tester's finding: the new session was deleted and the browser, its old record taken, had
   * neither). The old record is ended again, best effort, so that its cookie opens nothing
   * either way. Counted as taken: the new record keeps what the old one held (a sign-out of the
   * old cookie in another tab in that same moment, before the pointer, is the one it does not see).
   */
  private async taken (oldId: string): Promise<boolean> {
    try {
      return await this.store.end(storeKeys.session(oldId))
    } catch (error) {
      // Refused (a demoted master, a command the ACL denies): it did not run, and the old cookie
      // still opens its session; the sign-in fails instead (an attacker's finding: it was counted
      // as taken, and the old session was told ended everywhere while it went on).
      if (refusedByStore(error)) throw error
      await this.store.end(storeKeys.session(oldId)).catch(() => {})
      return true
    }
  }

  /**
   * The ids `id` was renamed to within the minute, in order. Only read: ending a session twice is
   * harmless, and a sign-out with a made-up cookie writes nothing (a store that refuses writes
   * still answers it). Best effort: a pointer that cannot be read (its key on a Redis Cluster
   * node that is down) ends the chain, and never a sign-out whose own session is already ended.
   */
  async chain (id: string): Promise<string[]> {
    const ids: string[] = []
    for (let from: string | null = id; ids.length < MAX_HOPS;) {
      from = await this.store.get(storeKeys.renamed(from)).catch(() => null)
      if (from === null) break
      ids.push(from)
    }
    return ids
  }
}
