// The stack a fault test needs: a real authorization server, an echo upstream and a gateway with
// one protected route `/app/` on the given store; `signIn()` gives a cookie of a valid session, and
// `hammer()` keeps requests going with it, recording every answer, until told to stop. Clients give
// up after CLIENT_PATIENCE_MS (status 0), so no test can wait forever on one lost connection.
import type { GatewayDeps } from '../../src/gateway.js'
import { Browser } from './browser.js'
import { oidcClient, reserveBaseUrl, startGateway, type TestGateway } from './gateway.js'
import { gatewayClient, startOidcProvider, type TestProvider } from './oidc.js'
import { startUpstream, type Upstream } from './upstream.js'

export interface Answer {
  status: number
  /** The body as received (JSON or the HTML page). */
  body: string
  location: string | null
  accept: string
  ms: number
  /** When the request was sent (Date.now: comparable with the `time` of the gateway's log lines on this machine). */
  startedAt: number
}

export interface FaultStack {
  gateway: TestGateway
  op: TestProvider
  upstream: Upstream
  /** Signs in through the real authorization server; the Cookie header of the new session. */
  signIn (login?: string): Promise<string>
  close (): Promise<void>
}

/** `raw.logout`: the provider offers back-channel logout (and keeps its sign-ins), the gateway's client registered for it. */
export async function startFaultStack (raw: { store: Record<string, unknown>, session?: Record<string, unknown>, logout?: boolean }, deps: GatewayDeps = {}): Promise<FaultStack> {
  const { port, baseUrl } = await reserveBaseUrl()
  const upstream = await startUpstream()
  const op = raw.logout === true
    ? await startOidcProvider([gatewayClient(baseUrl, 'demo', 'c', { backchannel: true })], { logout: true })
    : await startOidcProvider([{ client_id: 'c', client_secret: 's', redirect_uris: [`${baseUrl}/oauth/authorized/demo/`] }])
  const gateway = await startGateway({
    server: { port, baseUrl },
    store: raw.store,
    ...(raw.session ? { session: raw.session } : {}),
    providers: { demo: oidcClient(op.issuer, 'c', 's') },
    routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }],
  }, { deps })
  return {
    gateway,
    op,
    upstream,
    signIn: async (login = 'alice') => {
      const browser = new Browser()
      const response = await browser.navigate(`${gateway.url}/app/`, { login })
      if (response.status !== 200) throw new Error(`sign-in ended with ${response.status}`)
      return browser.cookieHeader(`${gateway.url}/app/`)!
    },
    close: async () => {
      await gateway.close()
      await op.close()
      await upstream.close()
    },
  }
}

/** Resolves once `load` has at least `count` answers after the first `since` that satisfy `match`. */
export async function answersAfter (load: { answers: Answer[] }, since: number, count: number, match: (answer: Answer) => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const started = Date.now()
  while (load.answers.slice(since).filter(match).length < count) {
    if (Date.now() - started > timeoutMs) throw new Error(`no ${count} answers ${what} within ${timeoutMs} ms (got ${load.answers.slice(since).filter(match).length})`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/**
 * How long a client waits for an answer before giving up, as a real one would. Every test here
 * expects its answers well within it; a request that reaches it is recorded as unanswered.
 */
const CLIENT_PATIENCE_MS = 15_000

/** One request to `url` with the session cookie, as a browser (HTML) or an API client (JSON); status 0 when no answer came. */
export async function ask (url: string, cookie: string, accept: 'application/json' | 'text/html', abandon?: AbortSignal, started = Date.now()): Promise<Answer> {
  const patience = AbortSignal.timeout(CLIENT_PATIENCE_MS)
  try {
    const response = await fetch(url, { headers: { cookie, accept }, redirect: 'manual', signal: abandon ? AbortSignal.any([patience, abandon]) : patience })
    const body = await response.text()
    return { status: response.status, body, location: response.headers.get('location'), accept, ms: Date.now() - started, startedAt: started }
  } catch (error) {
    // No answer at all (the connection was refused or dropped): status 0.
    return { status: 0, body: String(error), location: null, accept, ms: Date.now() - started, startedAt: started }
  }
}

/** What each hammer client waits between one answer and its next request. */
const PACE_MS = 5

/**
 * `clients` loops each sending one request after another (JSON and HTML in turn), PACE_MS apart,
 * until `stop()`; `stop()` resolves with every answer, in the order they came. The pause keeps the
 * load steady without spinning on fast 503s, which took the CPU other test files need.
 * `stop(abandonSentBefore)` gives up at once on a request still unanswered that was sent before
 * that time (status 0), rather than waiting out the client's patience: one a test already counts
 * as lost, such as one on a connection that died with its process.
 */
export function hammer (url: string, cookie: string, clients = 4): { answers: Answer[], stop (abandonSentBefore?: number): Promise<Answer[]> } {
  const answers: Answer[] = []
  const state = { running: true }
  const unanswered = new Set<{ startedAt: number, abandon: AbortController }>()
  const loops = Array.from({ length: clients }, async (_, i) => {
    for (let n = 0; state.running; n++) {
      const request = { startedAt: Date.now(), abandon: new AbortController() }
      unanswered.add(request)
      answers.push(await ask(url, cookie, (i + n) % 2 === 0 ? 'application/json' : 'text/html', request.abandon.signal, request.startedAt))
      unanswered.delete(request)
      await new Promise((resolve) => setTimeout(resolve, PACE_MS))
    }
  })
  return {
    answers,
    stop: async (abandonSentBefore) => {
      state.running = false
      for (const request of unanswered) if (abandonSentBefore !== undefined && request.startedAt < abandonSentBefore) request.abandon.abort()
      await Promise.all(loops)
      return answers
    },
  }
}
