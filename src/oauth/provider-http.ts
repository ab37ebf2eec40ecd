// The gateway's requests to providers (token, userinfo, GitHub's API) through undici's `request`
// on one keep-alive agent, answered as a WHATWG Response built from the whole body. Node's global
// fetch runs every request and answer through web streams, a visible share of a sign-in's CPU
// (see docs/performance.md). What callers see is fetch's behaviour: a TypeError when the
// provider cannot be reached, the signal's reason (a TimeoutError) when it did not answer in time,
// no redirects followed (oauth4webapi asks for none; a provider's API that redirects is an error).
// The signal ends the call whatever phase it is in: undici acts on an abort only once the connection
// is up, so a name lookup or connect that hangs held callers to undici's connect timeout (10 s)
// whatever the provider's `timeout` said. A lookup left hanging so is shared by every connection
// asking for that name meanwhile (src/ops/shared-lookup.ts): it holds one thread-pool thread, not one
// per call. A connection waits for its name at most undici's connect timeout, whatever the
// provider's `timeout` (a call given up earlier leaves its connection attempt to that timeout), so
// that is how long a lookup that never answers stays shared before the next call starts a fresh one.
import { Agent, request } from 'undici'
import { sharedLookup } from '../ops/shared-lookup.js'

/** Bodies larger than this are refused: a provider's token or userinfo answer is a few KiB. */
const MAX_BODY_BYTES = 1024 * 1024

/** undici's own default, written out: how long a connection attempt (name lookup included) may take. */
export const CONNECT_TIMEOUT_MS = 10_000

const agent = new Agent({ keepAliveTimeout: 10_000, connections: 64, connectTimeout: CONNECT_TIMEOUT_MS, connect: { lookup: sharedLookup(CONNECT_TIMEOUT_MS) } })

/** Statuses whose Response must have no body (the Fetch standard's null body status). */
const NULL_BODY = new Set([101, 103, 204, 205, 304])

function requestHeaders (headers: RequestInit['headers']): Record<string, string> {
  const out: Record<string, string> = {}
  new Headers(headers).forEach((value, name) => { out[name] = value })
  return out
}

function requestBody (body: RequestInit['body']): string | Buffer | undefined {
  if (body === undefined || body === null) return undefined
  if (typeof body === 'string') return body
  if (body instanceof URLSearchParams) return body.toString()
  if (body instanceof ArrayBuffer) return Buffer.from(body)
  if (ArrayBuffer.isView(body)) return Buffer.from(body.buffer, body.byteOffset, body.byteLength)
  throw new TypeError('providerFetch sends only string, URLSearchParams and byte bodies')
}

type Answer = Awaited<ReturnType<typeof request>>

/**
 * `pending`, or the signal's reason as soon as it fires, even while undici is still looking the
 * name up or connecting. What `pending` does afterwards is dropped: undici ends that connection
 * attempt on its own (at its connect timeout, or at connect, where it sees the abort).
 */
async function untilAborted (pending: Promise<Answer>, signal: AbortSignal | undefined): Promise<Answer> {
  if (!signal) return await pending
  let onAbort = () => {}
  const aborted = new Promise<never>((_resolve, reject) => {
    onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
  })
  try {
    return await Promise.race([pending, aborted])
  } finally {
    signal.removeEventListener('abort', onAbort)
    // An answer that comes after the abort has nobody to read it: free its connection.
    if (signal.aborted) pending.then((late) => late.body.destroy(), () => {})
  }
}

/**
 * The provider answered, but its answer could not be read whole (larger than the cap, cut off in
 * its body, a status no HTTP answer has): a TypeError as fetch's network failures are, told apart
 * so that a person is not told the endpoint "could not be reached" (a tester's finding).
 */
export class UnreadableAnswer extends TypeError {}

/** `fetch(url, init)` for the provider calls, as described above. */
export async function providerFetch (url: string | URL, init: RequestInit = {}): Promise<Response> {
  const signal = init.signal ?? undefined
  signal?.throwIfAborted()
  let answer: Answer
  try {
    answer = await untilAborted(request(url, {
      dispatcher: agent,
      method: (init.method ?? 'GET') as 'GET',
      headers: requestHeaders(init.headers),
      body: requestBody(init.body),
      signal,
    }), signal)
  } catch (error) {
    if (signal?.aborted) throw signal.reason
    throw new TypeError('fetch failed', { cause: error })
  }
  let body: Buffer
  try {
    const chunks: Buffer[] = []
    let size = 0
    for await (const chunk of answer.body) {
      size += (chunk as Buffer).length
      if (size > MAX_BODY_BYTES) throw new Error(`the answer is larger than ${MAX_BODY_BYTES} bytes`)
      chunks.push(chunk as Buffer)
    }
    body = Buffer.concat(chunks)
  } catch (error) {
    answer.body.destroy()
    if (signal?.aborted) throw signal.reason
    throw new UnreadableAnswer('fetch failed', { cause: error })
  }
  if (answer.statusCode < 200 || answer.statusCode > 599) throw new UnreadableAnswer('fetch failed', { cause: new Error(`status ${answer.statusCode}`) })
  const headers = new Headers()
  for (const [name, value] of Object.entries(answer.headers)) {
    if (value === undefined) continue
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one)
  }
  return new Response(NULL_BODY.has(answer.statusCode) ? null : body, { status: answer.statusCode, headers })
}
