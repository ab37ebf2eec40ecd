// The only renderer of errors: a small HTML page for browsers, JSON for everyone else. Messages
// come from GatewayError (safe by construction); anything else is a generic 500 whose details go
// to the log only.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { ERRORS, GatewayError, isGatewayError } from './errors.js'

/** A browser navigation asks for HTML; API clients, `*\/*` and no Accept get JSON. */
export function wantsHtml (request: FastifyRequest): boolean {
  return (request.headers.accept ?? '').includes('text/html')
}

export function escapeHtml (text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}

/** A small self-contained page; every dynamic value is escaped. */
export function renderPage (title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}code{background:#f3f3f3;padding:.1rem .3rem;border-radius:3px}a.button{display:inline-block;margin-top:1rem;padding:.5rem 1rem;background:#2456c7;color:#fff;border-radius:4px;text-decoration:none}</style>
</head><body>
${body}
</body></html>
`
}

function errorPage (error: GatewayError): string {
  const entry = ERRORS[error.code]
  const again = error.details.loginUrl ?? '/'
  return renderPage(entry.title, `<h1>${escapeHtml(entry.title)}</h1>
<p>${escapeHtml(entry.explanation)}</p>
<p>${escapeHtml(error.message)}</p>
<p>Error code: <code>${escapeHtml(error.code)}</code></p>
<a class="button" href="${escapeHtml(again)}">${error.details.loginUrl ? 'Sign in again' : 'Start over'}</a>`)
}

/** Turns anything thrown into a GatewayError: Fastify's own 4xx keep their status. */
function toGatewayError (error: FastifyError | Error): GatewayError {
  if (isGatewayError(error)) return error
  const status = (error as FastifyError).statusCode
  if (status !== undefined && status >= 400 && status < 500) {
    return new GatewayError('invalid_request', error.message, { cause: error, status })
  }
  return new GatewayError('internal_error', 'An unexpected error occurred.', { cause: error })
}

/** The cause's identifying fields only: library errors may carry bodies with tokens in them. */
function describeCause (cause: unknown): Record<string, unknown> | undefined {
  if (!(cause instanceof Error)) return undefined
  const { code } = cause as { code?: unknown }
  return { type: cause.name, message: cause.message, code, cause: describeCause(cause.cause) }
}

export function sendError (request: FastifyRequest, reply: FastifyReply, thrown: FastifyError | Error): FastifyReply {
  const error = toGatewayError(thrown)
  const fields = { err: { code: error.code, message: error.message, cause: describeCause(error.cause) } }
  if (error.statusCode >= 500) request.log.error(fields, 'request failed')
  else request.log.info(fields, 'request rejected')

  reply.code(error.statusCode).header('cache-control', 'no-store')
  for (const [name, value] of Object.entries(error.details.headers ?? {})) reply.header(name, value)
  if (wantsHtml(request)) return reply.type('text/html; charset=utf-8').send(errorPage(error))
  return reply.type('application/json; charset=utf-8').send({
    error: error.code,
    message: error.message,
    ...(error.details.loginUrl ? { login_url: error.details.loginUrl } : {}),
  })
}

export function registerErrorHandler (app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => sendError(request, reply, error))
  app.setNotFoundHandler(async () => {
    throw new GatewayError('not_found', 'Nothing is served at this address.')
  })
}
