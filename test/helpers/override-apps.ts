// The steps the `_method` differential tests share (round4-method-override-readings.test.ts and
// round4-method-override-second-reading.test.ts, in test/security/):
// each sends a request straight to an application that reads `_method` as a framework does, then
// through the gateway, and compares what the application acted on.
import { createServer, type IncomingMessage, type Server } from 'node:http'
import express from 'express'
import { rawExchange, statusOf } from './raw-http.js'

/** A request's whole body. */
export async function bodyOf (request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of request) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

/** A raw request to 127.0.0.1:`port`: `head` lines, then `body`; the answer's status code (0: none). */
export async function rawStatus (port: number, head: string[], body: Buffer): Promise<number> {
  const lines = [...head, 'Host: gateway', 'Accept: application/json', `Content-Length: ${body.length}`, 'Connection: close', '', '']
  return statusOf(await rawExchange(port, Buffer.concat([Buffer.from(lines.join('\r\n'), 'latin1'), body])))
}

/** A POST to `target` of the application `framework` reads `_method` as. */
export interface OverrideCase<F extends string> { framework: F, target: string, headers: string[], body: Buffer }

/** What the application did with a case sent straight to it and through the gateway. */
export interface Differential { direct: string | undefined, status: number, acted: string[] }

/**
 * Sends a case straight to its application (at `direct[framework]`), then through the gateway (at
 * `gatewayPort()`): the method the application acted on directly, the gateway's status, and what
 * the application acted on through it (`acted[framework]`, which each application appends to).
 */
export function differentials<F extends string> (acted: Record<F, string[]>, direct: Record<F, number>, gatewayPort: () => number): (request: OverrideCase<F>) => Promise<Differential> {
  return async ({ framework, target, headers, body }) => {
    let before = acted[framework].length
    await rawStatus(direct[framework], [`POST ${target} HTTP/1.1`, ...headers], body)
    const directly = acted[framework][before]
    before = acted[framework].length
    const status = await rawStatus(gatewayPort(), [`POST ${target} HTTP/1.1`, ...headers], body)
    return { direct: directly, status, acted: acted[framework].slice(before) }
  }
}

/**
 * Express 5 with its own body parsers (body-parser 2.4: urlencoded, with qs when `extended`, and
 * JSON) and method-override's documented body getter (a list's first value): each request's method
 * as it acts on it goes to `acted` (`error:<method>` for a body it refused).
 */
export function expressApp (extended: boolean, acted: string[]): Server {
  const methods = ['get', 'head', 'post', 'put', 'delete', 'options', 'patch']
  const app = express()
  app.use(express.urlencoded({ extended }))
  app.use(express.json())
  app.use((request, _response, next) => {
    const body = request.body as Record<string, unknown> | undefined
    if (body !== undefined && typeof body === 'object' && '_method' in body) {
      const value = Array.isArray(body._method) ? body._method[0] : body._method
      if (typeof value === 'string' && methods.includes(value.toLowerCase())) request.method = value.toUpperCase()
    }
    next()
  })
  app.use((request, response) => { acted.push(request.method); response.json({}) })
  app.use((_error: unknown, request: express.Request, response: express.Response, _next: express.NextFunction) => { acted.push(`error:${request.method}`); response.status(400).end() })
  return createServer(app)
}
