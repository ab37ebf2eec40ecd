// An application that honours `_method` as Rails (Rack::MethodOverride) and Laravel do: a POST whose
// urlencoded or multipart body (or, as Laravel, whose query) has a `_method` field naming a method is
// handled as that method. It records, per request, the method it acted on and the exact bytes of the
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

/** The fields of a multipart body with string values (parts without a filename), as Rack reads them. */
function multipartFields (body: Buffer, contentType: string): URLSearchParams {
  const fields = new URLSearchParams()
  const boundary = /boundary="?([^";]+)"?/i.exec(contentType)?.[1]
  if (boundary === undefined) return fields
  for (const part of body.toString('latin1').split(`--${boundary}`)) {
    const split = part.indexOf('\r\n\r\n')
    if (split === -1) continue
    const headers = part.slice(0, split)
    const name = /content-disposition:[^\r\n]*\bname="([^"]*)"/i.exec(headers)?.[1]
    if (name === undefined || /filename=/i.test(headers)) continue
    fields.append(name, Buffer.from(part.slice(split + 4).replace(/\r\n$/, ''), 'latin1').toString('utf8'))
  }
  return fields
}

/** The body's fields as the application parses them: urlencoded (or no type: Rack's default) and multipart. */
function bodyFields (body: Buffer, contentType: string | undefined): URLSearchParams {
  const type = contentType?.split(';')[0]!.trim().toLowerCase()
  if (type === undefined || type === '' || type === 'application/x-www-form-urlencoded') return new URLSearchParams(body.toString('utf8'))
  if (type === 'multipart/form-data') return multipartFields(body, contentType!)
  return new URLSearchParams()
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
