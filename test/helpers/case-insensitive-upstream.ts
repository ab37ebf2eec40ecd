// An application that routes as Express and Koa do by default, and IIS always: case-insensitively,
// and (as IIS and Windows file names do) with each segment's trailing dots and spaces dropped and
// NTFS's stream suffix read as the file or directory itself, so `/wiki/ADMIN./users`,
// `/wiki/admin%20/users` and `/wiki/admin::$INDEX_ALLOCATION/users` reach its `/wiki/admin/users`. It answers with the
// path it routed on, and records each request's target as it arrived. Listens on a loopback port
// from the OS. With `frontController`, it also dispatches as a PHP front controller and Rails do: a
// script segment followed by more is the script, the rest its PATH_INFO (`/app/index.php/admin/x`
// is `/app/admin/x`), a trailing `/` and a format suffix (`/admin.json`) name the same action.
import { createServer, type Server } from 'node:http'
import { close, listen } from './net.js'

export interface CaseInsensitiveUpstream {
  url: string
  /** Each request as it arrived: `METHOD target`. */
  seen: string[]
  /** The paths its router matched, as it read them (`/wiki/admin/users`). */
  routed: string[]
  close (): Promise<void>
}

/** The path as such a router reads it: decoded, lower case, each segment without trailing dots and spaces and an NTFS stream suffix. */
export function routedPath (target: string): string {
  const path = target.split('?')[0]!
  return path.split('/').map((segment) => {
    let decoded = segment
    try {
      decoded = decodeURIComponent(segment)
    } catch {}
    // NTFS's `name:stream:$TYPE` is the file or directory `name` (the default stream, or its index).
    return decoded.toLowerCase().replace(/[. ]+$/, '').replace(/^([^:]*):[^:]*:\$\w+$/, '$1').replace(/[. ]+$/, '')
  }).join('/')
}

/** `routedPath` as a front controller and a Rails router dispatch it (see the file's header). */
export function frontControllerPath (target: string): string {
  const segments = routedPath(target).split('/')
  if (segments.length > 2 && segments[segments.length - 1] === '') segments.pop()
  const kept = segments.filter((segment, i) => i === segments.length - 1 || !/\.(?:php|phtml|cgi|pl|aspx?|asmx|ashx|svc)$/.test(segment))
  kept[kept.length - 1] = kept[kept.length - 1]!.replace(/(.)\.[a-z0-9]{1,10}$/, '$1')
  return kept.join('/')
}

export async function startCaseInsensitiveUpstream (options: { frontController?: boolean } = {}): Promise<CaseInsensitiveUpstream> {
  const route = options.frontController === true ? frontControllerPath : routedPath
  const upstream: CaseInsensitiveUpstream = { url: '', seen: [], routed: [], close: async () => {} }
  const server: Server = createServer((req, res) => {
    upstream.seen.push(`${req.method ?? ''} ${req.url ?? ''}`)
    const path = route(req.url ?? '/')
    upstream.routed.push(path)
    req.resume()
    req.on('end', () => {
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({ routed: path }))
    })
  })
  upstream.url = await listen(server)
  upstream.close = async () => await close(server)
  return upstream
}
