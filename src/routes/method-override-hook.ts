// Method overrides on a proxied route whose rules name methods (access/method-override.ts says what
// counts as one): a preParsing hook, after the access hook admitted the request, judges each method
// a `?_method=` or a POST body's `_method` names with the route's own compiled judge, and refuses
// with 403 `forbidden` naming the rule when any is refused (a multipart boundary that parsers read
// differently is a 400 `invalid_request`: access/multipart-boundary.ts). A body it looks at is read
// once, whole, within OVERRIDE_BODY_MAX bytes (413 `payload_too_large` beyond) and the route's
// timeout, then the same bytes go upstream; any other body streams on unread. Such a body with a
// Content-Encoding (gzip, deflate, br) is refused, 415 `unsupported_media_type`: the hook
// would judge compressed bytes, and an application that decompresses request bodies (Express's
// body-parser does by default) would read the `_method` inside them; so is a form or JSON body in
// a charset that could spell `_method` in other bytes (UTF-7, UTF-16: body-parser decodes them). A POST a `public`
// rule let through is held to the same: where the route's `public` rules name methods, each method
// its `_method` names must be public on that path too (a `public: [POST
// /comments]` is no anonymous DELETE to an application that honours `_method=DELETE`), else 403.
// Routes whose rules and public rules name no methods, and whose `deny` rules name no paths, get
// no hook at all. The method-override
// headers (X-HTTP-Method-Override and kin) never reach the upstream of a protected route
// (proxy/headers.ts), so they need no judging here. On a route whose `deny` rules name paths, the
// same hook reads a form POSTed to a path a front controller serves for the route it names (Yii's
// `r`: access/posted-route.ts), within the same bounds (its charset aside: PHP decodes none), and
// refuses it with 403 where a `deny` holds on that route as it would on `?r=`.
import { Readable } from 'node:stream'
import type { FastifyReply, FastifyRequest, preParsingHookHandler, RequestPayload } from 'fastify'
import { bodyOverrides, formKind, queryOverrides, forbiddenOverride, namesMethods, unreadCharset, type FormKind } from '../access/method-override.js'
import { postedRoute, postedRouteKind } from '../access/posted-route.js'
import { broughtToken, refusal } from '../access/refusal.js'
import { shownPath, type RouteGate } from '../access/gate.js'
import type { RouteConfig } from '../config/types.js'
import type { Judge } from '../access/rules.js'
import { GatewayError } from '../errors.js'
import { deadlineTimers, type DeadlineTimers } from '../proxy/deadline-list.js'

/** The largest body read to find `_method` in (1 MiB); a larger one is refused with 413 on such a route. */
export const OVERRIDE_BODY_MAX = 1024 * 1024

/** What the hook needs of its route. */
export interface OverrideRoute {
  /** The route's compiled rules: the judge its gate uses. */
  readonly judge: Judge
  /** The route's (first) provider: whose session passed, unless the admitted request names another. */
  readonly provider: string
  /** The route's timeout: the whole body must have arrived within it. */
  readonly timeoutMs: number
  /** The sign-in address that returns to `next` (the 403's "Sign in again"). */
  readonly loginUrl: (next: string) => string
  /** Where "Use another account" goes from `next`. */
  readonly switchAccount: (next: string) => string
  /** The largest body read (default {@link OVERRIDE_BODY_MAX}). */
  readonly maxBytes?: number
  /** Whether the route's rules name methods: an admitted request's overrides are judged by `judge`. */
  readonly judgesAllowed: boolean
  /** The route's `public` test, where its public rules name methods: a public request's overrides must be public too. */
  readonly isPublic?: (method: string, target: string) => boolean
  /** Whether a `deny` rule names paths: an admitted form POSTed to a front controller is judged again for the route it names. */
  readonly readsPostedRoute: boolean
}

/** Whether a Content-Encoding header names a coding: anything but absent, empty or `identity`. */
export function contentCoded (header: string | undefined): boolean {
  if (header === undefined) return false
  return header.split(',').some((coding) => {
    const name = coding.trim().toLowerCase()
    return name !== '' && name !== 'identity'
  })
}

/** An answer that leaves part of the body unread: the connection is closed after it, never reused mid-body. */
function unreadBody (reply: FastifyReply, error: GatewayError): GatewayError {
  reply.header('connection', 'close')
  return error
}

/**
 * The whole body, read within `maxBytes` and `timeoutMs`: beyond either, or when the client ends it
 * early, the error that answers the request. `declared` is the Content-Length, checked before
 * anything is read.
 */
export async function readBounded (body: NodeJS.ReadableStream & { destroy (error?: Error): unknown }, declared: string | undefined, maxBytes: number, timeoutMs: number, timers: DeadlineTimers = deadlineTimers, purpose = 'check its method rules'): Promise<Buffer> {
  const tooLarge = () => new GatewayError('payload_too_large', `The request body is larger than this route reads to ${purpose} (${maxBytes} bytes).`)
  if (declared !== undefined && Number(declared) > maxBytes) throw tooLarge()
  let late = false
  const cancel = timers.setTimeout(() => {
    late = true
    body.destroy(new Error('the request body did not arrive within the route\'s timeout'))
  }, timeoutMs)
  const chunks: Buffer[] = []
  let length = 0
  try {
    for await (const chunk of body) {
      const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
      length += buffer.length
      if (length > maxBytes) throw tooLarge()
      chunks.push(buffer)
    }
  } catch (error) {
    if (error instanceof GatewayError) throw error
    const why = late ? `did not arrive within ${timeoutMs} ms` : 'ended before it was whole'
    throw new GatewayError('invalid_request', `The request cannot be served: its body ${why}.`, { cause: error })
  } finally {
    cancel()
  }
  return Buffer.concat(chunks)
}

/**
 * The refusal of an admitted request for a method its `_method` names, as the access hook refuses
 * (bearer callers get no sign-in): only this request's method was refused, since the request itself
 * was admitted (`refusedFor`, no other account offered).
 */
function refuse (request: FastifyRequest, route: OverrideRoute, rule: string | undefined, method: string | undefined, reason = 'method_override'): Error {
  const credential = request.audit?.credential ?? null
  request.audit = { decision: 'forbidden', user: request.audit?.user ?? null, rule: rule ?? 'none', credential, reason }
  const refusedFor = method === undefined ? {} : { refusedFor: { method, path: shownPath(request.url) } }
  const decision = { kind: 'forbidden', identity: request.allowed?.identity, loginUrl: route.loginUrl(request.url), rule, ...refusedFor } as const
  return broughtToken(credential)
    ? refusal(decision, { subject: 'this route', byToken: true })
    : refusal(decision, { subject: 'this route', switchAccountUrl: route.switchAccount(request.url) })
}

/** The refusal of a public request whose `_method` names a method that is not public on its path: no session was read, so no account is offered. */
function notPublic (request: FastifyRequest, method: string | undefined): Error {
  request.audit = { decision: 'forbidden', user: null, rule: 'public', credential: null, reason: 'method_override' }
  const named = method === undefined ? 'a value that is no method' : method
  return new GatewayError('forbidden', `This ${request.method} is public, but its _method names ${named}, which is not public on ${shownPath(request.url)}: send the request as that method, signed in.`)
}

/** The hook of `route` (see the file's header), or undefined when neither its rules nor its public rules name methods. */
export function methodOverrideHookFor (route: RouteConfig, gate: RouteGate, switchAccount: (next: string) => string): preParsingHookHandler | undefined {
  const judgesAllowed = namesMethods(route.rules)
  const publicMethods = route.public.some((rule) => rule.method !== '*')
  const readsPostedRoute = route.rules.deny.some((rule) => rule.paths.length > 0)
  if (!judgesAllowed && !publicMethods && !readsPostedRoute) return undefined
  return methodOverrideHook({
    judge: gate.judge,
    provider: gate.provider,
    timeoutMs: route.timeoutMs,
    maxBytes: route.methodOverrideMaxBody,
    loginUrl: gate.loginUrl,
    switchAccount,
    judgesAllowed,
    readsPostedRoute,
    ...(publicMethods ? { isPublic: gate.isPublic } : {}),
  })
}

/**
 * The route's preParsing hook: see the file's header. A request that can name no other method (not
 * a POST, no query) goes on at once, with no promise made for it: most requests of such a route.
 */
function methodOverrideHook (route: OverrideRoute): preParsingHookHandler {
  const judged = judgedOverrides(route)
  return (request, reply, payload, done) => {
    const decision = request.audit?.decision
    // Of a public request, only a POST's: Rack, Laravel and Symfony honour `_method` on a POST alone
    // (a CORS preflight's `OPTIONS ...?_method=PUT` is none).
    const judges = decision === 'allow' ? route.judgesAllowed : decision === 'public' && route.isPublic !== undefined && request.method === 'POST'
    const routes = decision === 'allow' && route.readsPostedRoute && request.method === 'POST' ? postedRouteKind(request.headers['content-type'], request.url) : undefined
    if (routes === undefined && (!judges || (request.method !== 'POST' && !request.url.includes('?')))) return done(null, payload)
    judged(request, reply, payload, { methods: judges, routes }).then((body) => { done(null, body) }, done)
  }
}

/** Which of a request's readings the hook judges: the methods its `_method` names; the route its POSTed form names, in a form of this kind. */
interface Judged { readonly methods: boolean, readonly routes: FormKind | undefined }

function judgedOverrides (route: OverrideRoute): (request: FastifyRequest, reply: FastifyReply, payload: RequestPayload, judged: Judged) => Promise<RequestPayload> {
  const maxBytes = route.maxBytes ?? OVERRIDE_BODY_MAX
  return async (request, reply, payload, judged) => {
    const kind = judged.methods ? (request.method === 'POST' ? formKind(request.headers['content-type']) : undefined) : judged.routes
    const methods = judged.methods ? queryOverrides(request.url) : []
    const body = kind === undefined ? undefined : await readForm(request, reply, payload, kind, judged.methods, maxBytes, route.timeoutMs)
    if (body !== undefined && judged.methods) methods.push(...bodyOverrides(kind!, body, request.headers['content-type']))
    if (request.audit?.decision === 'public') {
      // Not public in the method named: refused outright (a public request carries no session to judge).
      const at = methods.findIndex((method) => method === undefined || route.isPublic?.(method, request.url) !== true)
      if (at !== -1) throw notPublic(request, methods[at])
    } else {
      const posted = body !== undefined && judged.routes !== undefined ? postedRoute(judged.routes, body, request.headers['content-type'], request.url) : undefined
      // Each method named, on the path and on the route the form names (Yii reads both from one form: a re-reader's finding).
      const provider = request.allowed?.provider ?? route.provider
      const overridden = (target: string) => forbiddenOverride(route.judge, request.allowed?.identity, target, request.ip, methods, provider)
      const refused = methods.length === 0 ? undefined : overridden(request.url) ?? (posted === undefined ? undefined : overridden(posted))
      if (refused !== undefined) throw refuse(request, route, refused.rule, refused.method)
      judgePostedRoute(request, route, posted)
    }
    // The very bytes read go upstream; the forwarder takes the stream as the request's body.
    return body === undefined ? payload : Readable.from(body.length === 0 ? [] : [body])
  }
}

/**
 * A form body of `kind`, read whole to judge its `_method` (`methods`) or else the route its `r`
 * names (said in its refusals): refused unread when it has a Content-Encoding, or, for `_method`,
 * in a charset that could spell the field in other bytes (but a multipart one's: Express decodes
 * them; PHP, which reads `r`, decodes none).
 */
async function readForm (request: FastifyRequest, reply: FastifyReply, payload: RequestPayload, kind: FormKind, methods: boolean, maxBytes: number, timeoutMs: number): Promise<Buffer> {
  const purpose = methods ? 'judge its _method' : 'judge the route its r field names'
  if (contentCoded(request.headers['content-encoding'])) {
    reply.header('accept-encoding', 'identity')
    throw unreadBody(reply, new GatewayError('unsupported_media_type', `This route reads a ${request.method}'s body to ${purpose}, and cannot read it with Content-Encoding ${String(request.headers['content-encoding']).slice(0, 40)}: send the body without Content-Encoding.`))
  }
  const charset = kind === 'multipart' || !methods ? undefined : unreadCharset(request.headers['content-type'])
  if (charset !== undefined) {
    throw unreadBody(reply, new GatewayError('unsupported_media_type', `This route reads a ${request.method}'s body to ${purpose}, and cannot read it in charset ${charset.slice(0, 40)}: send it in UTF-8.`))
  }
  try {
    return await readBounded(payload, request.headers['content-length'], maxBytes, timeoutMs, deadlineTimers, purpose)
  } catch (error) {
    throw error instanceof GatewayError ? unreadBody(reply, error) : error
  }
}

/** Refuses an admitted POST whose form names a route (Yii's `r`) that a `deny` holds on: `target`, the request as the rules read it (postedRoute), when it names one. */
function judgePostedRoute (request: FastifyRequest, route: OverrideRoute, target: string | undefined): void {
  if (target === undefined) return
  const judgement = route.judge(request.allowed?.identity, request.method, target, request.ip, request.allowed?.provider ?? route.provider)
  if (!judgement.admit) throw refuse(request, route, judgement.rule, undefined, 'posted_route')
}
