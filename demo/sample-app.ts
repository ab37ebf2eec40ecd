// The demo's protected upstream: a small page showing, first, the headers the gateway added (the
// bearer token masked, the identity headers, the assertion shortened), then whom it serves (the
// bearer token's owner, as the provider's userinfo endpoint reports it) and every request header it
// received, credentials masked. At /mcp, an MCP server for agents (./sample-mcp.ts).
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { MCP_PATH, serveMcp } from './sample-mcp.js'

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

/** The headers the gateway adds (docs/upstreams.md), in the order a reader looks for them. */
const INJECTED = ['authorization', 'x-forwarded-user', 'x-forwarded-email', 'x-forwarded-groups', 'x-gateway-assertion']

/** A long value (the signed assertion) shortened: a person sees that it arrived and how long it is. */
function shortened (value: string): string {
  return value.length <= 48 ? value : `${value.slice(0, 32)}… [${value.length} characters]`
}

/** The block above the fold: what the gateway added to this request (itself, or through the proxy in front, which copies them from its answer). */
function injected (headers: Array<[string, string]>): string {
  const rows = INJECTED.flatMap((name) => headers.filter(([k]) => k === name).map(([k, v]) => `<tr><th>${escape(k)}</th><td>${escape(shortened(v))}</td></tr>`))
  const body = rows.length === 0 ? '<p class="warn">None: is this page reached through the gateway?</p>' : `<table>${rows.join('')}</table>`
  // A newcomer's point: a route that renames them (identityHeaders) or adds its own (headers:) seemed to lose them here.
  const names = '<p class="note">By their default names; a route\'s <code>identityHeaders</code> and <code>headers:</code> may name others, which show under &ldquo;Request headers this app received&rdquo; below.</p>'
  return `<section id="injected"><h2>Headers the gateway vouches for</h2>${body}${names}</section>`
}

function render (user: Record<string, unknown> | string, headers: Array<[string, string]>, path: string, signOutUrl: string): string {
  const who = typeof user === 'string'
    ? `<p class="warn">${escape(user)}</p>`
    : `<h1>Hello, ${escape(String(user.name ?? user.sub))}</h1>`
  const owner = typeof user === 'string'
    ? ''
    : `<h2>Who the token belongs to</h2>
<p>This app saw your access token and asked the provider who owns it:</p>
<table>${Object.entries(user).map(([k, v]) => `<tr><th>${escape(k)}</th><td>${escape(String(v))}</td></tr>`).join('')}</table>`
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Sample app</title>
<style>body{font:15px/1.5 system-ui,sans-serif;max-width:46rem;margin:1rem auto;padding:0 1rem;color:#222}h1{font-size:1.5rem;margin:.3rem 0}h2{font-size:1.1rem;margin:.8rem 0 .3rem}
table{border-collapse:collapse;width:100%;margin-bottom:1rem}th,td{text-align:left;padding:.2rem .5rem;border-bottom:1px solid #eee;vertical-align:top}
th{width:12rem;color:#555;font-weight:600}td{font-family:ui-monospace,monospace;word-break:break-all}#injected{background:#f6f8fc;border:1px solid #dbe3f3;border-radius:6px;padding:.2rem .8rem}
@media (max-width:30rem){th{width:auto}#injected th,#injected td{display:block;border:0;padding:0 .2rem}#injected td{padding-bottom:.3rem}}
.warn{color:#a33}.note{color:#555;font-size:.9rem;margin:.2rem 0 .5rem}a.button{display:inline-block;padding:.5rem 1rem;background:#444;color:#fff;border-radius:4px;text-decoration:none}</style></head><body>
<p><small>Sample upstream app &middot; path <code>${escape(path)}</code></small></p>
${who}
${injected(headers)}
${owner}
<h2>Request headers this app received</h2>
<table>${headers.map(([k, v]) => `<tr><th>${escape(k)}</th><td>${escape(v)}</td></tr>`).join('')}</table>
<a class="button" href="${escape(signOutUrl)}">Sign out</a>
</body></html>`
}

/**
 * Listens on loopback; `userinfoUrl` is the provider's userinfo endpoint; `signOutUrl` the gateway's
 * sign-out (default `/oauth/logout/`, on the gateway in front; absolute where the app is also
 * reached through another proxy, as with the demo's `--forward-auth`).
 */
export async function startSampleApp (options: { port?: number, host?: string, userinfoUrl: string, signOutUrl?: string }): Promise<SampleApp> {
  const server = createServer((req, res) => {
    if (req.url === MCP_PATH || req.url?.startsWith(`${MCP_PATH}?`) === true) {
      serveMcp(req, res)
      return
    }
    userinfo(options.userinfoUrl, req.headers.authorization).then((user) => {
      res.setHeader('content-type', 'text/html; charset=utf-8')
      res.end(render(user, maskHeaders(req.headers), req.url ?? '/', options.signOutUrl ?? '/oauth/logout/'))
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
