// An echo upstream on a loopback port: answers JSON with the request it received, and records it.
// `/slow` never answers (timeouts), `/close` drops the connection (bad gateway), `/delay/<ms>`
// answers after that long. Bodies: `/stream` sends a first chunk and the rest only on release(),
// `/events` likewise as a `text/event-stream` (its type in `?type=` when given);
// `/big/<bytes>` a body that large; `/untyped` no content-type; `/truncated` and `/stall` promise
// 100 bytes, send 10, then drop the connection or go quiet (each with an x-upstream header).
// `/set-cookies` and `/set-cookie` try to set the gateway's own cookies (and one of the app's);
// `/challenge` answers 401 naming an authorization server of its own.
// `/redirect?to=<value>` answers 302 with that Location; `/count` reads the body and answers its size
// (a body that stops short is recorded in `cutShort`).
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import { close, listen } from './net.js'

export interface SeenRequest { method: string, url: string, headers: IncomingHttpHeaders }

export interface Upstream {
  url: string
  seen: SeenRequest[]
  /** The `/count` requests whose body ended before it was all sent, with the bytes that came. */
  cutShort: Array<{ url: string, bytes: number }>
  /** Lets the pending `/stream` and `/events` answers finish. */
  release (): void
  close (): Promise<void>
}

export async function startUpstream (): Promise<Upstream> {
  const seen: SeenRequest[] = []
  const cutShort: Upstream['cutShort'] = []
  const held: Array<() => void> = []
  const server: Server = createServer((req, res) => {
    const request = { method: req.method ?? '', url: req.url ?? '', headers: req.headers }
    seen.push(request)
    if (req.url?.endsWith('/slow')) return
    const redirect = /\/redirect\?to=(.*)$/.exec(req.url ?? '')
    if (redirect) {
      res.writeHead(302, { location: decodeURIComponent(redirect[1]!), 'content-type': 'text/plain' }).end()
      return
    }
    if (req.url?.endsWith('/count')) {
      let bytes = 0
      req.on('data', (chunk: Buffer) => { bytes += chunk.length })
      req.on('end', () => { res.setHeader('content-type', 'application/json'); res.end(JSON.stringify({ bytes })) })
      req.on('close', () => { if (!req.complete) cutShort.push({ url: req.url ?? '', bytes }) })
      return
    }
    const delay = /\/delay\/(\d+)$/.exec(req.url ?? '')
    if (delay) {
      setTimeout(() => res.end(JSON.stringify(request)), Number(delay[1]))
      return
    }
    if (req.url?.endsWith('/challenge')) {
      // An upstream pointing the route's clients at an authorization server of its own (RFC 9728).
      res.writeHead(401, { 'www-authenticate': 'Bearer resource_metadata="https://evil.example/.well-known/oauth-protected-resource"', 'content-type': 'text/plain' })
      res.end('challenged')
      return
    }
    if (req.url?.endsWith('/close')) {
      req.socket.destroy()
      return
    }
    const events = /\/events(?:\?type=(.*))?$/.exec(req.url ?? '')
    if (events) {
      res.writeHead(200, { 'content-type': events[1] === undefined ? 'text/event-stream' : decodeURIComponent(events[1]), 'cache-control': 'no-store' })
      res.write('data: first\n\n')
      held.push(() => res.end('data: last\n\n'))
      return
    }
    if (req.url?.endsWith('/stream')) {
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.write('first,')
      held.push(() => res.end('last'))
      return
    }
    const big = /\/big\/(\d+)$/.exec(req.url ?? '')
    if (big) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': big[1] })
      res.end(Buffer.alloc(Number(big[1]), 'x'))
      return
    }
    if (req.url?.endsWith('/set-cookies')) {
      // What a hostile or careless upstream may try: setting the gateway's own cookies.
      res.setHeader('set-cookie', ['gw_session=PlantedByTheUpstream0123456789abcdefghijklmno; Path=/', 'GW_SESSION_FLOW=x; Path=/oauth/', 'gw_session_as.sig=x; Path=/', '=gw_session=Nameless; Path=/', 'gw_session_flow; Path=/', 'gw_session ; Path=/', 'app=kept; Path=/'])
      res.end('cookies')
      return
    }
    if (req.url?.endsWith('/set-cookie')) {
      res.setHeader('set-cookie', 'gw_session=PlantedByTheUpstream0123456789abcdefghijklmno; Path=/app/')
      res.end('cookie')
      return
    }
    if (req.url?.endsWith('/untyped')) {
      res.writeHead(200, { 'content-length': '5' })
      res.end('plain')
      return
    }
    if (req.url?.endsWith('/truncated') || req.url?.endsWith('/stall')) {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '100', 'x-upstream': 'yes' })
      res.write('0123456789')
      if (req.url.endsWith('/truncated')) setTimeout(() => req.socket.destroy(), 20)
      return
    }
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify(request))
  })
  const url = await listen(server)
  const release = () => { for (const end of held.splice(0)) end() }
  return { url, seen, cutShort, release, close: async () => { release(); await close(server) } }
}
