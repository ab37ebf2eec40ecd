// An application that honours `_method` as Rails (Rack::MethodOverride) and Laravel do: a POST whose
// urlencoded or multipart body (or, as Laravel, whose query) has a `_method` field naming a method is
// handled as that method (a multipart boundary read as Rack 2.2 or PHP 8 read it). It records, per request, the method it acted on and the exact bytes of the
// body it received, and answers 200 with that method.
import { createServer, type Server } from 'node:http'
import { close, listen } from './net.js'

export interface Handled {
  url: string
  /** The method the application acted on, after the override. */
  method: string
  contentType: string | undefined
  body: Buffer
}

export interface OverrideUpstream {
  url: string
  handled: Handled[]
  close (): Promise<void>
}

const METHODS = new Set(['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'PATCH', 'LINK', 'UNLINK'])

/**
 * The boundary as Rack 2.2 reads it (`/\Amultipart\/.*boundary=\"?([^\";,]+)\"?/ni`: the last
 * `boundary=` anywhere, cut at `"`, `;` or `,`), or as PHP 8 does (the first `boundary`, its next `=`,
 * then up to the closing quote, or `,` or `;`).
 */
function boundaryOf (contentType: string, reading: 'rack' | 'php'): string | undefined {
  if (reading === 'rack') return /^multipart\/.*boundary="?([^";,]+)"?/i.exec(contentType)?.[1]
  const at = contentType.indexOf('boundary') === -1 ? contentType.toLowerCase().indexOf('boundary') : contentType.indexOf('boundary')
  const equals = at === -1 ? -1 : contentType.indexOf('=', at)
  if (equals === -1) return undefined
  const value = contentType.slice(equals + 1)
  if (value.startsWith('"')) return value.includes('"', 1) ? value.slice(1, value.indexOf('"', 1)) : undefined
  return value.split(/[,;]/, 1)[0]
}

/**
 * The fields of a multipart body with string values (parts without a filename), as Rack reads them: a
 * part's name is its Content-Disposition `name`, else its Content-ID.
 */
function multipartFields (body: Buffer, contentType: string, reading: 'rack' | 'php'): URLSearchParams {
  const fields = new URLSearchParams()
  const boundary = boundaryOf(contentType, reading)
  if (boundary === undefined || boundary === '') return fields
  // What stands before the first delimiter is no part.
  for (const part of body.toString('latin1').split(`--${boundary}`).slice(1)) {
    const split = part.indexOf('\r\n\r\n')
    if (split === -1) continue
    const headers = part.slice(0, split)
    const name = /content-disposition:[^\r\n]*\bname="([^"]*)"/i.exec(headers)?.[1] ?? /content-id:\s*([^\r\n]*)/i.exec(headers)?.[1]
    if (name === undefined || /filename=/i.test(headers)) continue
    fields.append(name, Buffer.from(part.slice(split + 4).replace(/\r\n$/, ''), 'latin1').toString('utf8'))
  }
  return fields
}

/**
 * The body's fields as the application parses them: urlencoded (or no type: Rack's default) and any
 * `multipart/*` (with Rack's boundary; for multipart/form-data, PHP's when Rack's finds no `_method`).
 */
function bodyFields (body: Buffer, contentType: string | undefined): URLSearchParams {
  const type = contentType?.split(';')[0]!.trim().toLowerCase()
  if (type === undefined || type === '' || type === 'application/x-www-form-urlencoded') return new URLSearchParams(body.toString('utf8'))
  if (!type.startsWith('multipart/')) return new URLSearchParams()
  const rack = multipartFields(body, contentType!, 'rack')
  return rack.has('_method') || type !== 'multipart/form-data' ? rack : multipartFields(body, contentType!, 'php')
}

/** The method a request is handled as: a POST's body `_method`, else its query's (Laravel), upper case, when it names a method. */
export function effectiveMethod (method: string, url: string, contentType: string | undefined, body: Buffer): string {
  if (method !== 'POST') return method
  const named = bodyFields(body, contentType).get('_method') ?? new URL(url, 'http://app').searchParams.get('_method')
  const upper = named?.toUpperCase()
  return upper !== undefined && METHODS.has(upper) ? upper : method
}

export async function startOverrideUpstream (): Promise<OverrideUpstream> {
  const handled: Handled[] = []
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const body = Buffer.concat(chunks)
      const contentType = req.headers['content-type']
      const method = effectiveMethod(req.method ?? '', req.url ?? '', contentType, body)
      handled.push({ url: req.url ?? '', method, contentType, body })
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({ method }))
    })
  })
  const url = await listen(server)
  return { url, handled, close: async () => { await close(server) } }
}
