// What the registries of a session's open streams and websockets (session-streams.ts,
// session-sockets.ts) do after a gap in the `session-ended` broadcast (the subscription lost for a
// while, a Redis restart): an ending may have gone unheard, so each held session is looked for in
// the store, and those gone end (an outside tester's finding: an event stream outlived its
// sign-out until session.maxAge). A look the store does not answer (slow or down just after a
// restart) is made again later, while the session is still held (a re-reading's finding: one
// failed look left the stream open).
import type { Timers } from '../ops/clock.js'

/** How long after a look the store did not answer it is made again. */
export const LOOK_AGAIN_MS = 5000

export interface HeldSessions {
  /** Whether the session with this store id is still in the store (Sessions.exists). */
  exists: (id: string) => Promise<boolean>
  /** Whether this registry still holds something of the session. */
  holds: (id: string) => boolean
  /** Ends what the registry holds of the session. */
  end: (id: string) => void
  timers: Timers
  /**
   * The sessions a look is under way or due again for: another gap meanwhile starts no second look
   * (a re-reading's finding: a look per gap piled up), but marks it (true) to be made once more
   * when it answers "there", since it may have read the store before that gap's missed ending (a
   * re-reading of that fix: the session ended in the second gap was never looked for again).
   */
  readonly looking: Map<string, boolean>
}

/** Looks for each of `ids` in the store, ending those gone; a look that fails is made again, as is one a later gap overtook. */
export function lookForEnded (ids: Iterable<string>, held: HeldSessions): void {
  const look = (id: string): void => {
    held.looking.set(id, false)
    held.exists(id).then((there) => {
      if (!there) {
        held.looking.delete(id)
        held.end(id)
      } else if (held.looking.get(id) === true && held.holds(id)) look(id)
      else held.looking.delete(id)
    }, () => {
      held.timers.setTimeout(() => {
        if (held.holds(id)) look(id)
        else held.looking.delete(id)
      }, LOOK_AGAIN_MS)
    })
  }
  for (const id of [...ids]) {
    if (held.looking.has(id)) held.looking.set(id, true)
    else look(id)
  }
}
