// What a token request claimed that its failure must give back. A code or refresh token is
// claimed once (store-adapter.ts consume) and a second use ends its grant; but when the store fails
// after the claim (a reply that came after store.timeout: Redis did it), the client got 503 and no
// tokens, and retries with the only token it has: that retry was taken for a second use, and the
// grant ended (an outside tester's finding). Each step that may be undone registers how; a store
// failure within the request undoes them all, before oidc-provider answers, and the request's end
// does any left (a failure outside the store's calls).
import { AsyncLocalStorage } from 'node:async_hooks'

type Undo = () => Promise<void>

const pending = new AsyncLocalStorage<Undo[]>()

/** Runs `request` (one of oidc-provider's token or revocation requests) with its undos kept; `failed` tells, once it has answered, whether they are due. */
export async function undoneIfFailed (request: () => Promise<void>, failed: () => boolean): Promise<void> {
  const undos: Undo[] = []
  await pending.run(undos, async () => {
    try {
      await request()
    } finally {
      if (failed()) await undoAll()
    }
  })
}

/** Keeps `undo` for the request under way (none outside one). */
export function onFailure (undo: Undo): void {
  pending.getStore()?.push(undo)
}

/** Runs the request's undos, latest first, each best effort (the store may fail again: the token then ends with its grant, as before). */
export async function undoAll (): Promise<void> {
  const undos = pending.getStore()
  if (undos === undefined) return
  for (const undo of undos.splice(0).reverse()) await undo().catch(() => {})
}
