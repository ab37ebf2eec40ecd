// What a token request claimed that its failure must give back, and what its success must write.
// A code or refresh token is claimed once (store-adapter.ts consume) and a second use ends its
// grant; but when the store fails after the claim (a reply that came after store.timeout: Redis
// did it), the client got 503 and no tokens, and retries with the only token it has: that retry was
// taken for a second use, and the grant ended (an outside tester's finding). Each step that may be
// undone registers how; a store failure within the request undoes them all, before oidc-provider
// answers, and the request's end does any left (a failure outside the store's calls). What marks
// a code or token used for good is written only once the request has been answered.
//
// A step the store refused (a failover's demoted master refuses every write, the undo of a claim
// too) is owed: this instance does it again before its next token request, so that the client's
// retry, once the store writes again, finds its token free (an outside tester's finding: it found
// it claimed, and the grant ended). Another instance finds the claim held for its short life, and
// answers 503 meanwhile (store-adapter.ts).
import { AsyncLocalStorage } from 'node:async_hooks'

type Step = () => Promise<void>

/** A write its request's answer waits on, and how to take it back should the store refuse it. */
interface Mark { write: Step, undo: Step }

/**
 * What one request registered: its undos (a failure's), the marks its success must write before
 * it answers, what else its success writes, and where what the store refuses is owed.
 */
interface Steps { undos: Step[], marks: Mark[], done: Step[], owed: Owed }

/** What a request whose success's mark the store refused answers instead (its client retries it). */
export const STORE_REFUSED = 'The session store cannot be reached right now; try again shortly.'

const pending = new AsyncLocalStorage<Steps>()

/** How many requests' refused steps an instance keeps; beyond, the oldest are dropped (a claim then ends with its short life). */
const OWED_MAX = 100

/** The steps the store refused, each request's in its order: done again before the instance's next token request. */
class Owed {
  private readonly lists: Step[][] = []

  /** `steps` in order, each tried; those that fail are owed, in the same order. */
  async runOrOwe (steps: Step[]): Promise<void> {
    const refused: Step[] = []
    for (const step of steps) await step().catch(() => { refused.push(step) })
    if (refused.length === 0) return
    this.lists.push(refused)
    if (this.lists.length > OWED_MAX) this.lists.shift()
  }

  /** The owed steps done again (each request's in its order, the requests side by side); those refused once more stay owed. */
  async settle (): Promise<void> {
    if (this.lists.length > 0) await Promise.all(this.lists.splice(0).map(async (steps) => { await this.runOrOwe(steps) }))
  }
}

/**
 * Runs one instance's token and revocation requests (oidc-provider's) with their steps kept:
 * `failed` tells, once a request has answered, whether its undos are due, else what its success
 * writes (when the authorization server has not settled them before answering, {@link settle}).
 */
export function requestSteps (): (request: () => Promise<void>, failed: () => boolean) => Promise<void> {
  const owed = new Owed()
  return async (request, failed) => {
    await owed.settle()
    await pending.run({ undos: [], marks: [], done: [], owed }, async () => {
      try {
        await request()
      } finally {
        await settle(failed())
      }
    })
  }
}

/**
 * The request under way answered: when it did not fail, its marks are written, then what else its
 * success writes; when it failed, or the store refused a mark, its undos run instead (a refused
 * mark's first), and it has failed: true. Once (what is done is not kept).
 */
export async function settle (failed: boolean): Promise<boolean> {
  const steps = pending.getStore()
  if (steps === undefined) return failed
  const { undos, marks, done } = steps
  steps.undos = []
  steps.marks = []
  steps.done = []
  let refused = failed
  for (const mark of failed ? [] : marks) {
    undos.push(mark.undo)
    refused = await mark.write().then(() => false, () => true)
    if (refused) break
  }
  await steps.owed.runOrOwe(refused ? undos.reverse() : done)
  return refused
}

/**
 * {@link settle} where oidc-provider answers (a Koa step after its handler): an answer whose mark
 * the store refused is not sent, but 503 `temporarily_unavailable` (a code or token's new tokens,
 * whose use could not be marked, must not leave: its second use would not be told).
 */
export async function settleAnswer (ctx: { status: number, body: unknown }): Promise<void> {
  if (await settle(ctx.status >= 500) && ctx.status < 500) {
    ctx.status = 503
    ctx.body = { error: 'temporarily_unavailable', error_description: STORE_REFUSED }
  }
}

/** Keeps `undo` for the request under way (none outside one). */
export function onFailure (undo: Step): void {
  pending.getStore()?.undos.push(undo)
}

/** Keeps `mark` for once the request under way has been answered without failing, before the answer leaves; outside one, it is written now. */
export async function markOnceAnswered (mark: Mark): Promise<void> {
  const steps = pending.getStore()
  if (steps === undefined) await mark.write()
  else steps.marks.push(mark)
}

/** Keeps `step` for once the request under way has been answered without failing; outside one, it is done now. */
export async function onceAnswered (step: Step): Promise<void> {
  const steps = pending.getStore()
  if (steps === undefined) await step()
  else steps.done.push(step)
}

/** Runs the request's undos, latest first (a store failure within it: before oidc-provider answers); those the store refuses are owed. */
export async function undoAll (): Promise<void> {
  const steps = pending.getStore()
  if (steps !== undefined) await steps.owed.runOrOwe(steps.undos.splice(0).reverse())
}
