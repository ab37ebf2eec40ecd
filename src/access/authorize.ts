// The one request pipeline: what may happen to a protected request, for the proxy and for
// forward-auth alike. It reads what the gate (gate.ts, a pure function) asks for and nothing more:
// a session this instance verified moments ago with a fresh token first (no promise, no store
// round trip), the store only when the gate asks (`read_session`), then the token refreshed if
// need be (oauth/refresh.ts), and, for an allowed request whose guard signs assertions, the
// identity assertion. Where the guard accepts machine clients (`bearer:`) and the request carries
// a bearer token, the token is checked (bearer.ts) instead, and no session is read: a caller with a
// token never gets the browser flow, whatever its Accept. The caller acts on the verdict and on
// nothing else, as the one responder (responder.ts) answers it.
import type { Sessions } from '../session/session.js'
import type { Identity, Session, SessionRecord } from '../session/record.js'
import type { TokenRefresher } from '../oauth/refresh.js'
import { stepUpProblem } from '../oauth/step-up.js'
import { TOKEN_MESSAGES, noTokenMessage } from '../oauth/token-messages.js'
import type { Credential } from '../ops/audit.js'
import { systemClock, type Clock } from '../ops/clock.js'
import type { TokenProblem } from '../oauth/access-tokens.js'
import { bearerToken, type BearerGuard, type BearerOutcome } from './bearer.js'
import { isQualified, qualify } from './name-spaces.js'
import { decide, failed, NO_SESSION, signedIn, tokenRefused, UNREAD, type Decision, type Judged, type RouteGate, type SessionState, type Subject } from './gate.js'

/** What the pipeline reads of a request: plain values, so that it knows nothing of Fastify. */
export interface AccessRequest extends Subject {
  /** Whether the client asked for HTML (a browser navigation): sign-in by redirect. */
  readonly html: boolean
  /** The Cookie header, as sent. */
  readonly cookie: string | undefined
  /** The header the guard's bearer check reads (`Authorization` or `Proxy-Authorization`), as sent; only read when the guard has one. */
  readonly authorization?: string | undefined
}

/**
 * Signs the identity assertion of one subject (a session's id, or a machine client's token hash) for
 * one audience (assertion/assertions.ts's AudienceAssertions).
 */
export interface AssertionSigner {
  /** The subject's assertion when one is signed for what `identity` says, and fresh; no promise (the fast path). */
  ready (id: string, identity: Identity): string | undefined
  assertion (id: string, identity: Identity): Promise<string>
}

/** What a token the gateway issued to an agent (src/agents/) stands for: its grant's session, or why it is refused. */
export type GrantOutcome =
  | { readonly ok: true, readonly cookie: string }
  /** `signed`: refused after its signature checked (the gateway issued it: its log line says `credential: agent`). */
  | { readonly ok: false, readonly problem: TokenProblem, readonly message: string, readonly signed: boolean }

/** The tokens the gateway issues to agents for one route (`agents: true`). */
export interface GrantGuard {
  /** Whether the token names the gateway as its issuer (unchecked): such a token is judged here, never by `bearer:`. */
  issuedHere (token: string): boolean
  /** The Cookie header of the session the token's grant is, once its signature, issuer, audience (this route) and lifetime check. */
  check (token: string): Promise<GrantOutcome>
  /** The same, at once, for a token this instance checked and whose grant it knows (still within the token's lifetime); else undefined. */
  checked (token: string): string | undefined
  /** When a token this instance checked for this route ends (its `exp`, clock ms); else undefined. */
  until (token: string): number | undefined
}

/** What one request is judged by: a route's (built once) or forward-auth's (built per request). */
export interface Guard {
  readonly gate: RouteGate
  /** Signs the assertion an allowed request carries; absent: none. */
  readonly signer?: AssertionSigner | undefined
  /** On a route with several providers: the signer of each (the session's provider signs). */
  readonly signers?: Readonly<Record<string, AssertionSigner | undefined>> | undefined
  /** Machine clients' tokens (`bearer:`); absent: only sessions. */
  readonly bearer?: BearerGuard | undefined
  /** Signs the assertion of a machine client, by the provider that issued its token; absent: none. */
  readonly bearerSigner?: ((issuer: string) => AssertionSigner | undefined) | undefined
  /** The tokens the gateway issues to agents for this route; absent: none are accepted. */
  readonly grants?: GrantGuard | undefined
}

/**
 * Forward with these credentials. `assertion`: when the guard signs one and the identity is known.
 * `via`: the header a machine client's token came in (absent: a session's token). `grant`: the
 * session an agent's token was judged as (its websockets and streams end with it).
 */
export type Allowed = Extract<Decision, { kind: 'allow' }> & {
  readonly assertion?: string | undefined
  readonly via?: BearerGuard['header']
  readonly grant?: Grant
  /** A bearer token's `exp` (clock ms; Infinity when it says none), when one let the request through: what a stream it holds cannot outlive. */
  readonly expires?: number | undefined
}

/** The session an agent's token was judged as: its Cookie header (its websockets are kept with it), its store id (its streams) and when it began (their session.maxAge). */
export interface Grant {
  readonly cookie: string
  readonly sessionId: string
  readonly createdAt: number
  /** The grant's session's sign-in at each provider: what a route's `reauth` judges its streams by. */
  readonly signIns: SessionRecord['providerSessions']
}

/** What the caller acts on: the gate's decision once the session is read, with the assertion when allowed. */
export type Verdict = (Exclude<Decision, { kind: 'allow' | 'read_session' }> & { readonly ofGrant?: true }) | Allowed

/** A refusal of a request that brought a token the gateway issued to an agent: its log line says `credential: agent`. */
function ofGrant (verdict: Verdict): Verdict {
  return verdict.kind === 'allow' ? verdict : { ...verdict, ofGrant: true }
}

export class Access {
  constructor (
    private readonly sessions: Sessions,
    private readonly refresher: TokenRefresher,
    /** What "now" is when a route's `reauth` judges how old a sign-in is. */
    private readonly clock: Clock = systemClock
  ) {}

  /** Whether `session`'s sign-in at the gate's provider is too old (or of another `acr`) for the route's `reauth`. */
  private needsStepUp (gate: RouteGate, session: Session): boolean {
    return gate.reauth !== undefined && stepUpProblem(gate.reauth, session.record.providerSessions?.[gate.provider], this.clock.now()) !== undefined
  }

  /**
   * The verdict on one request: at once (no promise) when the gate decides without the store (a
   * public path, a cached session with a fresh token and a ready assertion), else a promise.
   * Never rejects: a failing store or provider is the `unavailable` verdict.
   */
  authorize (guard: Guard, request: AccessRequest): Verdict | Promise<Verdict> {
    if (guard.grants !== undefined) {
      const token = bearerToken(request.authorization)
      if (guard.bearer === undefined && typeof token !== 'undefined') {
        const none = token === null ? TOKEN_MESSAGES.malformed : noTokenMessage(token)
        if (none !== undefined) return decide(guard.gate, request, false, tokenRefused(token === null ? 'malformed' : 'no_token', none, [])) as Verdict
      }
      if (typeof token === 'string' && (guard.bearer === undefined || guard.grants.issuedHere(token))) return this.grantAtOnce(guard, guard.grants, request, token) ?? this.withGrant(guard, guard.grants, request, token)
    }
    if (guard.bearer !== undefined) {
      const token = bearerToken(request.authorization)
      if (token !== undefined) return withToken(guard, guard.bearer, request, token)
    }
    const cached = this.sessions.cached(request.cookie)
    const state = (cached && this.cachedState(guard.gate, cached)) ?? UNREAD
    const decision = decide(guard.gate, request, request.html, state)
    if (decision.kind === 'read_session') return this.afterReading(guard, request)
    return withAssertion(guard, decision, cached)
  }

  /**
   * A cached session as the gate reads it, when that takes no store (its token is fresh): the same
   * provider, identity (as the route names it) and step-up read() would give. Undefined otherwise.
   * The one reading of a cached session, for a browser's cookie and an agent's grant alike: the
   * agent's path once named the person by the provider's raw identity, and rules and identity
   * headers saw demo's `partner:mallory` as partner's mallory (an outside tester's finding).
   */
  private cachedState (gate: RouteGate, session: Session): SessionState | undefined {
    const several = gate.providers.length > 1
    const provider = several ? this.freshProvider(gate, session) : gate.provider
    const token = provider !== undefined && this.refresher.freshToken(session, provider)
    return token ? signedIn(token.access_token, this.identityAt(gate, session, provider!), this.needsStepUp(gate, session), several ? provider : undefined) : undefined
  }

  /**
   * The session's identity at `provider` as the route names it: the people of a provider other than
   * the route's first are `<provider>:<user>` (name-spaces.ts), so that GitHub's `alice` never
   * reaches the application as the first provider's `alice`, nor the first's `github:alice` as
   * GitHub's. Qualified once per identity read.
   */
  private identityAt (gate: RouteGate, session: Session, provider: string): Identity | undefined {
    const identity = session.record.identities?.[provider]
    if (identity === undefined || !isQualified(identity, provider, gate.provider, gate.spaces)) return identity
    // The own provider's people are qualified with their old names kept (aka): a memo of each kind.
    const memo = provider === gate.provider ? this.ownQualified : this.qualified
    let qualified = memo.get(identity)
    if (qualified === undefined) {
      qualified = qualify(identity, provider, gate.provider)
      memo.set(identity, qualified)
    }
    return qualified
  }

  /** Identities of a route's other providers, qualified as identityAt names them (kept while the session's record is). */
  private readonly qualified = new WeakMap<Identity, Identity>()
  /** Identities of a route's own provider whose names read as qualified ones, qualified as identityAt names them. */
  private readonly ownQualified = new WeakMap<Identity, Identity>()

  /**
   * On a route with several providers: the one read() would pick (the first in the route's order
   * whose token is usable), when its token is fresh; undefined when that takes the store (a
   * refresh), so that both paths judge a session as the same provider.
   */
  private freshProvider (gate: RouteGate, session: Session): string | undefined {
    for (const provider of gate.providers) {
      const token = session.record.tokens[provider]
      if (token === undefined) continue
      if (this.refresher.freshToken(session, provider) !== undefined) return provider
      // Stale: read() refreshes it first (and goes on to the next only when it cannot).
      if (token.refresh_token !== undefined) return undefined
    }
    return undefined
  }

  /**
   * An agent's request decided without a promise, as a browser's with a cached session is: a token
   * this instance checked, its grant's session cached with a fresh provider token. Else undefined
   * (withGrant reads what is missing).
   */
  private grantAtOnce (guard: Guard, grants: GrantGuard, request: AccessRequest, token: string): Verdict | Promise<Verdict> | undefined {
    const cookie = grants.checked(token)
    const session = cookie === undefined ? undefined : this.sessions.cached(cookie)
    const state = session && this.cachedState(guard.gate, session)
    if (!state) return undefined
    const first = decide(guard.gate, request, false, UNREAD)
    if (first.kind !== 'read_session') return undefined
    const decision = decide(guard.gate, request, false, state)
    if (decision.kind === 'read_session') return undefined
    return withGrantOf(withAssertion(guard, decision, session), { cookie: cookie!, sessionId: session.id, createdAt: session.record.createdAt, signIns: session.record.providerSessions })
  }

  /**
   * A request with a token the gateway issued to an agent: judged as the grant's session would be
   * (the provider's token, the rules, the identity), never as the token itself; a grant whose
   * session has ended is an `inactive` token. The gate's own answer comes first (a public path).
   */
  private async withGrant (guard: Guard, grants: GrantGuard, request: AccessRequest, token: string): Promise<Verdict> {
    const first = decide(guard.gate, request, false, UNREAD)
    if (first.kind !== 'read_session') return await withAssertion(guard, first, undefined)
    let outcome: GrantOutcome
    try {
      outcome = await grants.check(token)
    } catch (error) {
      // Before any signature was checked: not told as an agent's (an attacker's finding).
      return { kind: 'unavailable', error }
    }
    // Logged as an agent's only once its signature checked: a guessed or forged one is anyone's (an attacker's finding).
    const refuse = (problem: TokenProblem, message: string, signed: boolean) => {
      const verdict = decide(guard.gate, request, false, tokenRefused(problem, message, [])) as Verdict
      return signed ? ofGrant(verdict) : verdict
    }
    if (!outcome.ok) return refuse(outcome.problem, outcome.message, outcome.signed)
    const { state, session, tokenless } = await this.read(outcome.cookie, guard.gate)
    // A grant whose provider token can no longer be renewed (none left to refresh with) is over:
    // its session ends, so that the agent's refresh is refused too and it authorizes again.
    if (tokenless !== undefined) await this.sessions.end(tokenless).catch(() => {})
    if (state.kind === 'none') return refuse('inactive', 'The grant this token belongs to has ended (signed out, revoked or expired): authorize again.', true)
    const decision = decide(guard.gate, request, false, state)
    if (decision.kind === 'read_session') return { kind: 'unavailable', error: new Error('the gate asked for the session twice'), ofGrant: true }
    return ofGrant(await withGrantOf(withAssertion(guard, decision, session), { cookie: outcome.cookie, sessionId: session!.id, createdAt: session!.record.createdAt, signIns: session!.record.providerSessions }))
  }

  private async afterReading (guard: Guard, request: AccessRequest): Promise<Verdict> {
    const { state, session } = await this.read(request.cookie, guard.gate)
    const decision = decide(guard.gate, request, request.html, state)
    // The state is no longer unread, so the gate cannot ask again; should it, that is a bug.
    if (decision.kind === 'read_session') return { kind: 'unavailable', error: new Error('the gate asked for the session twice') }
    return await withAssertion(guard, decision, session)
  }

  /** The session from the store, its token refreshed if need be, as the gate reads it. */
  private async read (cookie: string | undefined, gate: RouteGate): Promise<{ state: SessionState, session: Session | undefined, tokenless?: Session }> {
    try {
      const session = await this.sessions.load(cookie) ?? undefined
      if (session === undefined) return { state: NO_SESSION, session: undefined }
      const several = gate.providers.length > 1
      // With several providers, the first (in the route's order) whose token is usable, refreshed if need be.
      for (const provider of gate.providers) {
        const token = await this.refresher.usableToken(session, provider)
        if (token) return { state: signedIn(token.access_token, this.identityAt(gate, session, provider), this.needsStepUp(gate, session), several ? provider : undefined), session }
      }
      return { state: NO_SESSION, session: undefined, tokenless: session }
    } catch (error) {
      return { state: failed(error), session: undefined }
    }
  }
}

/** An allowed verdict carries the grant it was judged as. */
function withGrantOf (verdict: Verdict | Promise<Verdict>, grant: Grant): Verdict | Promise<Verdict> {
  const carry = (judged: Verdict): Verdict => judged.kind === 'allow' ? { ...judged, grant } : judged
  return verdict instanceof Promise ? verdict.then(carry) : carry(verdict)
}

/** The decision as a verdict: an allowed one with the guard's assertion (signed now if none is ready). */
function withAssertion (guard: Guard, decision: Exclude<Decision, { kind: 'read_session' }>, session: Session | undefined): Verdict | Promise<Verdict> {
  if (decision.kind !== 'allow') return decision
  const signer = decision.provider === undefined ? guard.signer : guard.signers?.[decision.provider]
  // The gate's own decision when there is nothing to sign: no second object on the hot path.
  if (signer === undefined || session === undefined || decision.identity === undefined) return decision
  return signed(signer, session.id, decision, undefined)
}

/** An allowed decision with the subject's assertion: at once when one is ready, else once signed. */
function signed (signer: AssertionSigner, session: string, decision: Extract<Decision, { kind: 'allow' }>, via: Allowed['via'], expires?: number): Verdict | Promise<Verdict> {
  const { accessToken, identity, rule, provider } = decision
  // Nobody to vouch for (a public path): nothing to sign.
  if (identity === undefined) return { kind: 'allow', accessToken, identity, rule, provider, via, expires }
  // Kept by the session (or token) and the name this route gives its person: one route may name a
  // second issuer's `alice` `partner:alice`, another whose own provider that is `alice`, and the
  // assertion one signed must never reach the other's upstream.
  const id = `${session} ${identity.sub}`
  const ready = signer.ready(id, identity)
  if (ready !== undefined) return { kind: 'allow', accessToken, identity, rule, provider, assertion: ready, via, expires }
  // A signing that fails (the key ring's store) is the store's failure, answered as such.
  return signer.assertion(id, identity).then(
    (assertion): Verdict => ({ kind: 'allow', accessToken, identity, rule, provider, assertion, via, expires }),
    (error: unknown): Verdict => ({ kind: 'unavailable', error }))
}

/**
 * The verdict on a request that carries a bearer token (null: the Bearer scheme without a usable
 * token): the gate's own answer first (a path outside the route, a public path: the token is not
 * looked at), then the token's outcome judged as a session would be. Never reads the store.
 */
function withToken (guard: Guard, bearer: BearerGuard, request: AccessRequest, token: string | null): Verdict | Promise<Verdict> {
  const first = decide(guard.gate, request, false, UNREAD)
  if (first.kind !== 'read_session') return withAssertion(guard, first, undefined)
  let outcome: BearerOutcome | Promise<BearerOutcome>
  try {
    outcome = bearer.check(token)
  } catch (error) {
    return { kind: 'unavailable', error }
  }
  if (outcome instanceof Promise) {
    return outcome.then((settled) => tokenVerdict(guard, bearer, request, token ?? '', settled), (error: unknown): Verdict => ({ kind: 'unavailable', error }))
  }
  return tokenVerdict(guard, bearer, request, token ?? '', outcome)
}

function tokenVerdict (guard: Guard, bearer: BearerGuard, request: AccessRequest, token: string, outcome: BearerOutcome): Verdict | Promise<Verdict> {
  const state = outcome.ok ? signedIn(token, outcome.identity, false, outcome.issuer) : tokenRefused(outcome.problem, outcome.message, outcome.scopes)
  const decision = decide(guard.gate, request, false, state)
  if (decision.kind === 'read_session') return { kind: 'unavailable', error: new Error('the gate asked for a session on a token') }
  if (decision.kind !== 'allow' || !outcome.ok) return decision
  const signer = guard.bearerSigner?.(outcome.issuer)
  if (signer === undefined) return { ...decision, via: bearer.header, expires: outcome.expires }
  return signed(signer, `bearer:${outcome.id}`, decision, bearer.header, outcome.expires)
}

/**
 * Whether the route still lets `subject` through with the token's new outcome: a websocket's token
 * asked again (proxy/bearer-sockets.ts) is judged by the rules as a request is (an attacker's
 * finding: a person who lost the group the route allows kept their socket to the token's exp).
 */
export function tokenAdmits (gate: RouteGate, subject: Subject, token: string, outcome: BearerOutcome): boolean {
  return outcome.ok && decide(gate, subject, false, signedIn(token, outcome.identity, false, outcome.issuer)).kind === 'allow'
}

/** Who asked, for the request's log line: the identity's user name, or null when nobody is known. */
export function auditUser (verdict: Verdict): string | null {
  return judged(verdict)?.identity?.sub ?? null
}

/** The signed-in person the rules judged, and the rule: admitted, refused, or asked for a fresher sign-in (`reauth`). */
function judged (verdict: Verdict): Judged | undefined {
  if (verdict.kind === 'allow' || verdict.kind === 'forbidden') return verdict
  return verdict.kind === 'step_up' || verdict.kind === 'sign_in' ? verdict.reauthOf : undefined
}

/** Which rule decided, for the request's log line: its name, or `none` (no rules, no allow rule matched, no session). */
export function auditRule (verdict: Verdict): string {
  return judged(verdict)?.rule ?? 'none'
}

/**
 * Which credential the request was judged by, for the request's log line, so that an audit tells a
 * machine client from a person: `agent` for a token the gateway issued to an agent, admitted or
 * refused; `bearer` whenever else the request carried a bearer token in the header the guard reads
 * (a session is then never looked at), `session` when a session was found (allowed or refused by
 * the rules), null when there was neither (a sign-in, a 401, a public path).
 * @param authorization the header the guard's bearer check reads, as sent (undefined when the guard has none)
 */
export function auditCredential (verdict: Verdict, authorization: string | undefined): Credential | null {
  // Nothing was judged: the token, if any, was not looked at.
  if (verdict.kind === 'public') return null
  if (verdict.kind === 'allow') return verdict.grant !== undefined ? 'agent' : verdict.via === undefined ? 'session' : 'bearer'
  if (verdict.ofGrant === true) return 'agent'
  if (verdict.kind === 'token_refused' || bearerToken(authorization) !== undefined) return 'bearer'
  return judged(verdict) !== undefined ? 'session' : null
}
