// Logger options: pino JSON with a request id on every line, one line per request, and nothing
// secret in it. Headers that carry credentials are redacted by path; `/oauth/` URLs lose their
// query string, or `code` and `state` would reach the log through `req.url`.
import type { FastifyRequest } from 'fastify'
import type { LoggerOptions } from 'pino'

/** The request URL as logged: the query of `/oauth/` URLs is dropped. */
export function loggableUrl (url: string): string {
  return url.startsWith('/oauth/') ? url.split('?')[0]! : url
}

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
  'code',
  'state',
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
