// The demo's protected upstream: a small page showing whom it serves (the bearer token's owner, as
// the provider's userinfo endpoint reports it) and the request headers it received, token masked.
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface SampleApp {
  url: string
  close (): Promise<void>
}

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/** Masks credentials: a person sees that a token arrived, never the token. */
function maskHeaders (headers: IncomingHttpHeaders): Array<[string, string]> {
  return Object.entries(headers).map(([name, value]) => {
    const text = Array.isArray(value) ? value.join(', ') : String(value ?? '')
    if (name === 'authorization') {
      const [scheme = '', token = ''] = text.split(' ')
      return [name, `${scheme} [masked: ${token.length} characters]`]
    }
    if (name === 'cookie') return [name, text.replace(/=([^;]*)/g, (_m, v: string) => `=[masked: ${v.length}]`)]
    return [name, text]
  })
}

async function userinfo (url: string, authorization: string | undefined): Promise<Record<string, unknown> | string> {
  if (!authorization?.startsWith('Bearer ')) return 'No bearer token arrived: is this page reached through the gateway?'
  try {
    const response = await fetch(url, { headers: { authorization }, signal: AbortSignal.timeout(3000) })
    if (!response.ok) return `The provider's userinfo endpoint answered ${response.status}.`
    return await response.json() as Record<string, unknown>
  } catch {
    return 'The provider\'s userinfo endpoint could not be reached.'
  }
}

function render (user: Record<string, unknown> | string, headers: Array<[string, string]>, path: string): string {
  const who = typeof user === 'string'
    ? `<p class="warn">${escape(user)}</p>`
    : `<h1>Hello, ${escape(String(user.name ?? user.sub))}</h1>
<p>The gateway signed you in. This app saw your access token and asked the provider who owns it:</p>
<table>${Object.entries(user).map(([k, v]) => `<tr><th>${escape(k)}</th><td>${escape(String(v))}</td></tr>`).join('')}</table>`
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Sample app</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:46rem;margin:3rem auto;padding:0 1rem;color:#222}table{border-collapse:collapse;width:100%;margin-bottom:1.5rem}
th,td{text-align:left;padding:.25rem .5rem;border-bottom:1px solid #eee;vertical-align:top}th{width:14rem;color:#555;font-weight:600}td{font-family:ui-monospace,monospace;word-break:break-all}
.warn{color:#a33}a.button{display:inline-block;padding:.5rem 1rem;background:#444;color:#fff;border-radius:4px;text-decoration:none}</style></head><body>
<p><small>Sample upstream app &middot; path <code>${escape(path)}</code></small></p>
${who}
<h2>Request headers this app received</h2>
<table>${headers.map(([k, v]) => `<tr><th>${escape(k)}</th><td>${escape(v)}</td></tr>`).join('')}</table>
<a class="button" href="/oauth/logout/">Sign out</a>
</body></html>`
}

/** Listens on loopback; `userinfoUrl` is the provider's userinfo endpoint. */
export async function startSampleApp (options: { port?: number, host?: string, userinfoUrl: string }): Promise<SampleApp> {
  const server = createServer((req, res) => {
    userinfo(options.userinfoUrl, req.headers.authorization).then((user) => {
      res.setHeader('content-type', 'text/html; charset=utf-8')
      res.end(render(user, maskHeaders(req.headers), req.url ?? '/'))
    }, () => {
      res.statusCode = 500
      res.end()
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve)
  })
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
