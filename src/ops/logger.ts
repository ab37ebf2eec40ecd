// Logger options: pino JSON with a request id on every line, one line per request, and nothing
// secret in it. Headers that carry credentials are redacted by path; logged URLs keep the query's
// names but not its values, or `code`, `state` and any token a client puts in a URL would reach
// the log through `req.url`.
import type { FastifyRequest } from 'fastify'
import type { BaseLogger, LoggerOptions } from 'pino'

/** What the parts below the web framework log through (Fastify's `app.log` is one). */
export type Logger = Pick<BaseLogger, 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'level'>

/** The `user:password@` of an absolute URL, up to the authority's end. */
const USERINFO = /^([a-z][a-z0-9+.-]*:\/\/)[^/?#]*@/i

/** A query parameter name worth keeping, when an `=` follows it; a bare name may be a token (`?sk_live_…`). */
const PARAMETER_NAME = /^[\w.[\]%-]{0,32}$/

/** Whether the request target `url` names the query parameter `name` as the log would keep it: as written, with an `=` after it. */
export function loggedParameterName (url: string, name: string): boolean {
  return PARAMETER_NAME.test(name) && (url.split('?', 2)[1] ?? '').split('&').some((part) => part.startsWith(`${name}=`))
}

/**
 * The request URL as logged: the path, and of the query only its parameter names
 * (`/app/x?access_token=abc&b=2` → `/app/x?access_token&b`); of a path parameter too
 * (`/app;jsessionid=abc` → `/app;jsessionid=…`), and nothing of a fragment, which no client should
 * send and a refused one may (`/cb#access_token=abc` → `/cb#…`), nor of an absolute-form target's
 * user and password (`http://u:pw@h/x` → `http://…@h/x`). Called once per request: a path without
 * `?`, `#` or `;` is returned as is.
 */
export function loggableUrl (url: string): string {
  // An absolute-form target (`http://u:pw@host/x`, which the gateway refuses) without its user and password.
  if (url.charCodeAt(0) !== 47 && url.includes('@')) url = url.replace(USERINFO, '$1…@')
  const hash = url.indexOf('#')
  const query = url.indexOf('?')
  if (hash !== -1 && (query === -1 || hash < query)) return `${loggablePath(url.slice(0, hash))}#…`
  if (query === -1) return loggablePath(url)
  return loggableQuery(loggablePath(url.slice(0, query)), url, query)
}

/**
 * A path with each `;name=value` parameter's value left out (a session id in a URL, `;jsessionid=`),
 * `;` and `=` also percent-encoded; a parameter without `=` is `…`, as a bare query name is.
 */
function loggablePath (path: string): string {
  if (!path.includes(';') && !(path.includes('%') && /%3b/i.test(path))) return path
  return path.split('/').map((segment) => {
    const [first, ...parameters] = segment.split(/;|%3b/i)
    return parameters.length === 0
      ? segment
      : `${first!}${parameters.map((parameter) => {
        const name = /^(.*?)(?:=|%3d)/i.exec(parameter)?.[1]
        return name !== undefined && PARAMETER_NAME.test(name) ? `;${name}=…` : ';…'
      }).join('')}`
  }).join('/')
}

/** `path` and the names of the query of `url` (from its `?` at `query`). */
function loggableQuery (path: string, url: string, query: number): string {
  let out = `${path}?`
  let start = query + 1
  while (start <= url.length) {
    let end = url.indexOf('&', start)
    if (end === -1) end = url.length
    const equals = url.indexOf('=', start)
    const name = url.slice(start, equals === -1 || equals > end ? end : equals)
    if (start > query + 1) out += '&'
    const named = equals !== -1 && equals < end
    out += named && PARAMETER_NAME.test(name) ? name : (name === '' ? '' : '…')
    start = end + 1
  }
  return out
}

/**
 * Redacted by path. OAuth's `code` and `state` are redacted where those values appear (a callback's
 * query or form body), not as any field named `code`: a worker's exit code or an errno must stay
 * readable. Token names are specific enough to redact wherever they are top-level fields.
 */
const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'headers.cookie',
  'headers["set-cookie"]',
  'client_secret',
  'access_token',
  'refresh_token',
  'id_token',
  'query.code',
  'query.state',
  'body.code',
  'body.state',
  'req.query.code',
  'req.query.state',
]

export function loggerOptions (level = process.env.LOG_LEVEL ?? 'info'): LoggerOptions {
  return {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    serializers: {
      req: (request: FastifyRequest) => ({
        method: request.method,
        url: loggableUrl(request.url),
        remoteAddress: request.ip,
      }),
    },
  }
}
