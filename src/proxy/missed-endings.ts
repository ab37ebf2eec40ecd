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
  /** The sessions a look is under way or due again for: another gap meanwhile adds none (a re-reading's finding: a look per gap piled up). */
  readonly looking: Set<string>
}

/** Looks for each of `ids` in the store, ending those gone; a look that fails is made again. */
export function lookForEnded (ids: Iterable<string>, held: HeldSessions): void {
  const look = (id: string): void => {
    held.exists(id).then((there) => {
      held.looking.delete(id)
      if (!there) held.end(id)
    }, () => {
      held.timers.setTimeout(() => {
        if (held.holds(id)) look(id)
        else held.looking.delete(id)
      }, LOOK_AGAIN_MS)
    })
  }
  for (const id of [...ids]) {
    if (held.looking.has(id)) continue
    held.looking.add(id)
    look(id)
  }
}
