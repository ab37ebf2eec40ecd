// The audit fields of a forward-auth answer (src/ops/audit.ts): the original request a trusted
// proxy named, as the rules judged it where they could tell it, and as the proxy sent it where they
// could not (an attacker's findings: `/%61dmin/pay` admitted by a rule on `/admin/*` escaped an
// audit of `/admin/`; an absolute or disagreeing X-Forwarded-Uri left no original URL at all).
import type { FastifyRequest } from 'fastify'
import type { Audit } from '../ops/audit.js'
import { HOME } from '../oauth/urls.js'
import { loggableUrl } from '../ops/logger.js'

/** The original request as forward-auth read it: its URL (undefined when it cannot be told), and the method and canonical path the rules judged. */
export interface OriginalRead {
  readonly uri: string | undefined
  readonly method: string | undefined
  readonly path: string | undefined
}

/** The headers a proxy names the original request's URL and method in, as forward-auth reads them. */
const URL_HEADERS = ['x-forwarded-uri', 'x-original-uri', 'x-original-url']
const METHOD_HEADERS = ['x-forwarded-method', 'x-original-method']
/** The most of each sent value a line keeps: a header may be long, and the line is not its copy. */
const SENT_MAX = 2048

/** What a trusted proxy sent in `names`, each as `name: value` (`loggable`: what a log line may say of a value), `; `-separated. */
function sent (request: FastifyRequest, names: string[], loggable: (value: string) => string): string[] {
  return names.flatMap((name) => (request.raw.headersDistinct[name] ?? []).slice(0, 3).map((value) => `${name}: ${loggable(value.slice(0, SENT_MAX))}`))
}

/**
 * `audit` with the original request: `originalMethod` and `originalUrl` as the rules judged them
 * (the canonical path, query names only); where either could not be told, `originalSent`, what the
 * proxy sent for it (`x-forwarded-uri: https://host/admin`, query names only; never one of two
 * disagreeing values as the original URL); nothing from a peer that is no trusted proxy (its word
 * names nothing). On a 401, whether its address was refused as the sign-in's return (`returnTo:
 * refused`: a host listed without the port it is served on sent every sign-in to /oauth/, and
 * nothing said why).
 */
export function forwardAudit (audit: Audit, request: FastifyRequest, fromProxy: boolean, original: OriginalRead, back: string): Audit {
  if (!fromProxy) return audit
  const told = original.path ?? original.uri
  const untold = [
    ...(original.method === undefined ? sent(request, METHOD_HEADERS, (value) => value.slice(0, 32)) : []),
    ...(told === undefined ? sent(request, URL_HEADERS, loggableUrl) : []),
  ]
  if (told === undefined && original.method === undefined && untold.length === 0) return audit
  const returnRefused = back === HOME && audit.decision === 'unauthenticated' && original.uri !== undefined && original.uri !== HOME
  const sentText = untold.length === 0 ? undefined : untold.join('; ')
  return { ...audit, original: { method: original.method, url: told === undefined ? undefined : loggableUrl(told), sent: sentText }, ...(returnRefused ? { returnTo: 'refused' as const } : {}) }
}
