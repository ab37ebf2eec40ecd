// Forward-auth behind ingress-nginx's auth location, whose lines are copied below from
// kubernetes/ingress-nginx's rootfs/etc/nginx/template/nginx.tmpl (`location = {{ $authPath }}`)
// with docs/forward-auth.md's annotations filled in, run by the real nginx. That location sets
// Host to the auth-url's own host and names the original request in X-Original-URL
// (`$scheme://$http_host$request_uri`) and X-Original-Method, empties X-Forwarded-Proto, and passes
// every other header of the client on. An outside tester's finding: the gateway judged the auth-url's
// host (no forwardAuth.hosts entry: every signed-in person passed payroll), or a client's own
// X-Forwarded-Host, and read the path a `deny` judged from a client's own X-Forwarded-Uri. It now
// reads X-Original-URL, which every other source of the host and path must agree with. A re-reading's
// finding: X-Original-URL's host is the client's Host header, while nginx chooses the Ingress by the
// request line's host for an absolute-form target; the docs' annotations now come with the
// auth-proxy-set-headers ConfigMap (X-Forwarded-Host: $host, the host nginx chose), and an Ingress
// without it is refused while forwardAuth.hosts has rules.
import { readFileSync } from 'node:fs'
import { request } from 'node:http'
import { connect } from 'node:net'
import { afterAll, describe, expect } from 'vitest'
import { signIn } from '../helpers/browser.js'
import { rawRequest } from '../helpers/raw-http.js'
import { frontBinary, holdFrontPort, type FrontProxy } from '../helpers/front-proxy.js'
import { runFront } from '../../demo/front-proxy.js'
import { oidcClient, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import type { Upstream } from '../helpers/upstream.js'

const PAYROLL = 'payroll.example.com'
/** An Ingress without the docs' auth-proxy-set-headers. */
const BARE = 'bare.example.com'
/** A host with no rules of its own. */
const WIKI = 'wiki.example.com'
const nginx = frontBinary('nginx')
/** The auth location's buffers as the docs' proxy-buffer-size annotation sets them (the controller's default: 4k). */
const BUFFER_SIZE = /nginx\.ingress\.kubernetes\.io\/proxy-buffer-size: "(\d+k)"/.exec(readFileSync('docs/forward-auth.md', 'utf8'))?.[1] ?? '4k'
if (nginx === undefined) console.warn('!!! nginx not installed: the ingress-nginx forward-auth tests are SKIPPED (.ci/run installs it) !!!')

let gateway: TestGateway
let app: Upstream
let front: FrontProxy
const cookies: Record<string, string> = {}

/**
 * The sites ingress-nginx renders: its catch-all default server (the default backend's 404), and an
 * Ingress with the docs' annotations for each of `hosts`, with the docs' `auth-proxy-set-headers`
 * ConfigMap (`X-Forwarded-Host: $host`, the host nginx chose) where `chosen`, without it elsewhere.
 */
function ingressSites (port: number, gatewayHostPort: string, upstream: string, hosts: Record<string, { chosen: boolean }>): string {
  return `
server {
    listen 127.0.0.1:${port} default_server;
    server_name _;
    location / { return 404; }
}
${Object.entries(hosts).map(([host, { chosen }]) => ingressSite(port, gatewayHostPort, upstream, host, chosen)).join('\n')}`
}

function ingressSite (port: number, gatewayHostPort: string, upstream: string, host: string, chosen: boolean): string {
  return `
server {
    listen 127.0.0.1:${port};
    server_name ${host};
    underscores_in_headers off;
    ignore_invalid_headers on;

    # ---- copied from nginx.tmpl's auth location (auth-url: http://${gatewayHostPort}/oauth/auth/demo/) ----
    location = /_external-auth-Lw-Prefix {
        internal;
        proxy_intercept_errors      off;
        proxy_pass_request_body     off;
        proxy_set_header            Content-Length          "";
        proxy_set_header            X-Forwarded-Proto       "";
        proxy_set_header            X-Request-ID            $request_id;
        proxy_set_header            Host                    ${gatewayHostPort};
        proxy_set_header            X-Original-URL          $scheme://$http_host$request_uri;
        proxy_set_header            X-Original-Method       $request_method;
        proxy_set_header            X-Sent-From             "nginx-ingress-controller";
        proxy_set_header            X-Real-IP               $remote_addr;
        proxy_set_header            X-Forwarded-For        $remote_addr;
        proxy_set_header            X-Auth-Request-Redirect $request_uri;
        # proxy-buffer-size (the docs' annotation; the controller's default is 4k), as nginx.tmpl writes it
        proxy_buffering             off;
        proxy_buffer_size           ${BUFFER_SIZE};
        proxy_buffers               4 ${BUFFER_SIZE};
        ${chosen ? '# auth-proxy-set-headers (the docs\' ConfigMap):\n        proxy_set_header X-Forwarded-Host "$host";' : '# no auth-proxy-set-headers'}
        proxy_ssl_server_name       on;
        proxy_pass_request_headers  on;
        proxy_http_version 1.1;
        set $target "http://${gatewayHostPort}/oauth/auth/demo/";
        proxy_pass $target;
    }

    # auth-signin (the docs' annotation), with auth-signin-redirect-param next
    location @auth-signin {
        internal;
        return 302 http://${gatewayHostPort}/oauth/login/demo/?next=$scheme://$http_host$request_uri;
    }

    location / {
        set $best_http_host $http_host;
        auth_request        /_external-auth-Lw-Prefix;
        error_page 401 = @auth-signin;
        auth_request_set    $auth_cookie $upstream_http_set_cookie;
        add_header          Set-Cookie $auth_cookie;
        auth_request_set $authHeader0 $upstream_http_authorization;
        proxy_set_header 'Authorization' $authHeader0;
        auth_request_set $authHeader1 $upstream_http_x_forwarded_user;
        proxy_set_header 'X-Forwarded-User' $authHeader1;
        auth_request_set $authHeader2 $upstream_http_x_forwarded_email;
        proxy_set_header 'X-Forwarded-Email' $authHeader2;
        auth_request_set $authHeader3 $upstream_http_x_forwarded_groups;
        proxy_set_header 'X-Forwarded-Groups' $authHeader3;
        auth_request_set $authHeader4 $upstream_http_x_gateway_assertion;
        proxy_set_header 'X-Gateway-Assertion' $authHeader4;
        proxy_set_header X-Forwarded-Host $best_http_host;
        proxy_set_header X-Forwarded-For $remote_addr;
        proxy_set_header X-Forwarded-Proto $scheme;
        proxy_pass http://${upstream};
    }
}
`
}

it.beforeAll(async ({ startStack, op, upstream }) => {
  app = upstream
  gateway = await startStack({
    server: { trustProxy: ['127.0.0.1'] },
    providers: { demo: oidcClient(op.issuer, 'c', 's', 'openid email groups') },
    // payroll: admins only, and never its /admin/ pages, as docs/forward-auth.md's example.
    forwardAuth: { allowedRedirectHosts: [PAYROLL], hosts: { [PAYROLL]: { allow: { groups: ['admins'] }, deny: { paths: ['/admin/*'] } }, [BARE]: { allow: { groups: ['admins'] } } } },
    routes: [],
  })
  for (const login of ['alice', 'bob']) cookies[login] = (await signIn(`${gateway.url}/oauth/login/demo/?next=/oauth/`, login)).cookie
  if (nginx === undefined) return
  const held = await holdFrontPort()
  const gatewayHostPort = `127.0.0.1:${gateway.config.server.port}`
  const config = ingressSites(held.port, gatewayHostPort, new URL(upstream.url).host, { [PAYROLL]: { chosen: true }, [BARE]: { chosen: false } })
  front = await runFront('nginx', nginx, config, { port: held.port, gateway: gatewayHostPort, upstream: new URL(upstream.url).host, host: PAYROLL }, held)
})

afterAll(async () => {
  await front?.stop()
})

/** One request written as is to nginx: `target` on the request line (origin or absolute form), `host` in Host. */
async function raw (target: string, host: string, cookie: string): Promise<{ status: number, user: string | undefined }> {
  const before = app.seen.length
  const status = await new Promise<number>((resolve, reject) => {
    const socket = connect(front.port, '127.0.0.1', () => {
      socket.write([`GET ${target} HTTP/1.1`, `Host: ${host}`, `Cookie: ${cookie}`, 'Accept: application/json', 'Connection: close', '', ''].join('\r\n'))
    })
    let data = ''
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => { data += chunk })
    socket.on('error', reject)
    socket.on('close', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0)))
  })
  const reached = app.seen.slice(before)[0]
  return { status, user: reached?.headers['x-forwarded-user'] as string | undefined }
}

async function through (path: string, lines: Record<string, string>): Promise<{ status: number, user: string | undefined }> {
  const before = app.seen.length
  const status = await new Promise<number>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: front.port, path, headers: { host: PAYROLL, accept: 'application/json', ...lines } }, (res) => {
      res.resume()
      res.on('end', () => resolve(res.statusCode ?? 0))
    })
    req.on('error', reject)
    req.end()
  })
  const reached = app.seen.slice(before).find((seen) => seen.url === path)
  return { status, user: reached?.headers['x-forwarded-user'] as string | undefined }
}

describe('behind ingress-nginx\'s auth location', () => {
  it.skipIf(nginx === undefined)('applies payroll\'s rules: alice (admins) passes with her identity, bob does not', async () => {
    expect(await through('/pay', { cookie: cookies.alice! })).toEqual({ status: 200, user: 'alice' })
    expect(await through('/pay', { cookie: cookies.bob! })).toEqual({ status: 403, user: undefined })
  })

  it.skipIf(nginx === undefined)('lets no X-Forwarded-Host of the client\'s choose the rules: nginx sets the one it chose', async () => {
    expect(await through('/pay', { cookie: cookies.bob!, 'x-forwarded-host': WIKI })).toEqual({ status: 403, user: undefined })
  })

  // A re-reading's finding: X-Original-URL's host is the client's Host header, while nginx chose the
  // Ingress by the request line's host (an absolute-form target); wiki's rules (none) were applied.
  it.skipIf(nginx === undefined)('refuses an absolute-form target whose Host names another host (the host cannot be told: 400, which nginx answers 500)', async () => {
    expect(await raw(`http://${PAYROLL}/pay`, WIKI, cookies.bob!)).toEqual({ status: 500, user: undefined })
    expect(await raw(`http://${PAYROLL}/admin/users`, WIKI, cookies.alice!)).toEqual({ status: 500, user: undefined })
    // In origin form, an unknown Host reaches the catch-all server, and payroll's own Host its rules.
    expect(await raw('/pay', WIKI, cookies.bob!)).toEqual({ status: 404, user: undefined })
    expect(await raw('/pay', PAYROLL, cookies.alice!)).toEqual({ status: 200, user: 'alice' })
  })

  it.skipIf(nginx === undefined)('refuses every request of an Ingress without the X-Forwarded-Host header, when forwardAuth.hosts has rules', async () => {
    expect(await raw('/pay', BARE, cookies.alice!)).toEqual({ status: 500, user: undefined })
  })

  it.skipIf(nginx === undefined)('lets no X-Forwarded-Uri of the client\'s choose the path a deny judges', async () => {
    expect(await through('/admin/users', { cookie: cookies.alice! })).toEqual({ status: 403, user: undefined })
    expect(await through('/admin/users', { cookie: cookies.alice!, 'x-forwarded-uri': '/pay' })).toEqual({ status: 403, user: undefined })
  })
})

// An outside tester's finding: at the controller's default 4k buffers the gateway's 401 (its
// X-Login-Url names the address percent-encoded, up to three times as long) was nginx's 500 for an
// address well under the 2,048 characters the gateway keeps: no sign-in. The docs' annotation.
describe('a long address behind ingress-nginx\'s auth location, with the docs\' proxy-buffer-size', () => {
  /** A browser without a session at `path` on payroll: the status, and where it is sent. */
  async function visit (path: string): Promise<{ status: number, next: string | null | undefined }> {
    return await new Promise((resolve, reject) => {
      const asked = request({ host: '127.0.0.1', port: front.port, path, headers: { host: PAYROLL, accept: 'text/html' } }, (response) => {
        response.resume()
        const location = response.headers.location
        response.on('end', () => resolve({ status: response.statusCode ?? 0, next: location === undefined ? undefined : new URL(location).searchParams.get('next') }))
      })
      asked.on('error', reject).end()
    })
  }

  it.skipIf(nginx === undefined).each([
    ['2,048 characters of slashes (each three in the sign-in address)', (room: number) => `/pay?q=${'/'.repeat(room - '/pay?q='.length)}`],
    ['a deep path of one-letter segments', (room: number) => `/docs${'/a'.repeat(Math.floor((room - '/docs'.length) / 2))}`],
  ])('%s: sent to sign in, back to that address', async (_case, path) => {
    const room = 2048 - `http://${PAYROLL}`.length
    const target = path(room)
    expect(`http://${PAYROLL}${target}`.length).toBeGreaterThan(2040)
    expect(await visit(target)).toEqual({ status: 302, next: `http://${PAYROLL}${target}` })
  })
})

describe('X-Original-URL from a trusted proxy', () => {
  // Asked directly (the peer is a trusted proxy) as the configured Ingress asks (X-Forwarded-Host:
  // the host nginx chose, unless a row says otherwise): alice may use payroll's /pay, never
  // /admin/*; a host that cannot be told is refused (400), a path that cannot be told refuses the
  // path rules.
  const rows: Array<[string, Record<string, string | undefined>, number]> = [
    ['X-Original-URL alone (forwardAuth.hosts has rules)', { 'x-original-url': `https://${PAYROLL}/pay`, 'x-forwarded-host': undefined }, 400],
    ['payroll, /pay', { 'x-original-url': `https://${PAYROLL}/pay` }, 200],
    ['payroll in upper case with its port', { 'x-original-url': 'https://PAYROLL.example.com:443/pay' }, 200],
    ['payroll, /admin/users', { 'x-original-url': `https://${PAYROLL}/admin/users` }, 403],
    ['payroll, /admin/users spelled with a dot segment', { 'x-original-url': `https://${PAYROLL}/x/../admin/users` }, 403],
    ['agreeing X-Forwarded-Host and -Uri', { 'x-original-url': `https://${PAYROLL}/pay`, 'x-forwarded-host': PAYROLL, 'x-forwarded-uri': '/pay' }, 200],
    ['another X-Forwarded-Host', { 'x-original-url': `https://${PAYROLL}/pay`, 'x-forwarded-host': 'other.example.com' }, 400],
    ['another X-Forwarded-Uri over /admin/', { 'x-original-url': `https://${PAYROLL}/admin/users`, 'x-forwarded-uri': '/pay' }, 403],
    ['another X-Original-URI over /admin/', { 'x-original-url': `https://${PAYROLL}/admin/users`, 'x-original-uri': '/pay' }, 403],
    ['X-Forwarded-Proto naming another scheme over /admin/', { 'x-original-url': `https://${PAYROLL}/admin/users`, 'x-forwarded-proto': 'http' }, 403],
    ['two values joined into one', { 'x-original-url': `https://${PAYROLL}/pay, https://other.example.com/pay` }, 400],
    ['no path', { 'x-original-url': `https://${PAYROLL}` }, 400],
    ['user information', { 'x-original-url': `https://x@${PAYROLL}/pay` }, 400],
    ['another scheme', { 'x-original-url': `ftp://${PAYROLL}/pay` }, 400],
    ['a relative URL', { 'x-original-url': '/pay' }, 400],
    ['a backslash in the host', { 'x-original-url': `https://${PAYROLL}\\@other.example.com/pay` }, 400],
  ]
  it.each(rows)('%s', async (_name, headers, status) => {
    const sent = Object.entries({ cookie: cookies.alice!, accept: 'application/json', 'x-forwarded-host': PAYROLL, ...headers }).filter((entry): entry is [string, string] => entry[1] !== undefined)
    const response = await fetch(`${gateway.url}/oauth/auth/demo/`, { headers: sent })
    await response.arrayBuffer()
    expect(response.status).toBe(status)
  })

  it('refuses it sent twice (400): either could be the client\'s', async () => {
    const port = gateway.config.server.port
    const response = await rawRequest(port, '/oauth/auth/demo/', [`Cookie: ${cookies.alice!}`, `X-Forwarded-Host: ${PAYROLL}`, `X-Original-URL: https://${PAYROLL}/pay`, `X-Original-URL: https://${PAYROLL}/pay`])
    expect(response.status).toBe(400)
  })
})
