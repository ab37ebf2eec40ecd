// An echo upstream on a loopback port: answers JSON with the request it received, and records it.
// `/slow` never answers (timeouts), `/close` drops the connection (bad gateway), `/delay/<ms>`
// answers after that long.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import { close, listen } from './net.js'

export interface SeenRequest { method: string, url: string, headers: IncomingHttpHeaders }

export interface Upstream {
  url: string
  seen: SeenRequest[]
  close (): Promise<void>
}

export async function startUpstream (): Promise<Upstream> {
  const seen: SeenRequest[] = []
  const server: Server = createServer((req, res) => {
    const request = { method: req.method ?? '', url: req.url ?? '', headers: req.headers }
    seen.push(request)
    if (req.url?.endsWith('/slow')) return
    const delay = /\/delay\/(\d+)$/.exec(req.url ?? '')
    if (delay) {
      setTimeout(() => res.end(JSON.stringify(request)), Number(delay[1]))
      return
    }
    if (req.url?.endsWith('/close')) {
      req.socket.destroy()
      return
    }
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify(request))
  })
  const url = await listen(server)
  return { url, seen, close: () => close(server) }
}
