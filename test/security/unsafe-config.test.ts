// Unsafe configurations do not start (docs/security.md): a guessable session.secret,
// provider endpoints over plain http to a host that is not loopback (configured or found by
// discovery), a non-Secure cookie on an https gateway, a public-suffix redirect host, identity
// headers HTTP gives a meaning, trustProxy: true off loopback. A `public` rule that opens a whole
// protected route and pkce: false are only warnings; `--check` prints warnings and still exits 0.
// Route overlap and shipped secrets: test/config/route-reach.test.ts, shipped-secrets.test.ts.
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { mkdtemp, writeFile } from 'node:fs/promises'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { configProblems } from '../helpers/config.js'
import { stringify } from 'yaml'
import { configWarnings, parseConfig } from '../../src/config/config.js'
import { secretProblem } from '../../src/config/safety.js'
import { TEST_SECRET, startGateway } from '../helpers/gateway.js'
import { close, listen, waitFor } from '../helpers/net.js'

const GENERATE = 'generate one with "openssl rand -base64 32"'
/** A secret the checks accept (from `openssl rand -base64 32`). */
const GOOD_SECRET = 'q3Vt8mJ0bXcE1s7yKp2RzL9wH4dNfA6gUoTiC5eBvMk='

const problems = configProblems

/** A config with one provider `p` (plain OAuth 2.0 unless `issuer` is given) and the given fields. */
function withProvider (fields: Record<string, unknown>): string {
  return stringify({ session: { secret: GOOD_SECRET }, providers: { p: { clientId: 'c', clientSecret: 's', scope: 'read', ...fields } } })
}

const insecure = (key: string, host: string, line: number) =>
  `providers.p.${key}: uses plain http to "${host}", which is not a loopback host: tokens and the client secret would cross the network unencrypted; use https, or set providers.p.dangerouslyAllowInsecureHttp: true if the network in between is trusted (line ${line})`

describe('unsafe configs are refused with a message naming the key and the fix', () => {
  it.each([
    ['a short secret', 'session: { secret: short }',
      [`session.secret: must be at least 32 characters, got 5; ${GENERATE} (line 1)`]],
    ['one repeated character', `session: { secret: "${'x'.repeat(40)}" }`,
      [`session.secret: is one character repeated, which anyone can guess; ${GENERATE} (line 1)`]],
    ['a short repeated pattern', `session: { secret: "${'abc'.repeat(12)}" }`,
      [`session.secret: is a 3-character pattern repeated, which anyone can guess; ${GENERATE} (line 1)`]],
    ['a longer repeated pattern', `session: { secret: "${'Pa55w0rd!'.repeat(4)}" }`,
      [`session.secret: is a 9-character pattern repeated, which anyone can guess; ${GENERATE} (line 1)`]],
    ['fewer than 8 distinct characters', 'session: { secret: "aabbaccbdabcadbbcacdabbbcaddcbabdabc" }',
      [`session.secret: uses only 4 distinct characters, which is easy to guess; ${GENERATE} (line 1)`]],
    ['a run of consecutive characters', 'session: { secret: "abcdefghijklmnopqrstuvwxyz0123456789" }',
      [`session.secret: looks predictable (about 6 bits of randomness estimated, at least 64 needed); ${GENERATE} (line 1)`]],
    ['an http issuer on a remote host', withProvider({ issuer: 'http://op.example.org', scope: 'openid' }),
      [insecure('issuer', 'op.example.org', 8)]],
    ['http endpoints on a private address', withProvider({ authorizeUrl: 'http://10.0.0.5/auth', tokenUrl: 'http://10.0.0.5/token', userinfoUrl: 'http://10.0.0.5/me' }),
      [insecure('authorizeUrl', '10.0.0.5', 8), insecure('tokenUrl', '10.0.0.5', 9), insecure('userinfoUrl', '10.0.0.5', 10)]],
    ['a host that only starts like localhost', withProvider({ authorizeUrl: 'https://op.example.org/auth', tokenUrl: 'http://localhost.example.org/token' }),
      [insecure('tokenUrl', 'localhost.example.org', 9)]],
    ['an IPv6 address other than ::1', withProvider({ authorizeUrl: 'https://op.example.org/auth', tokenUrl: 'http://[fd00::1]/token' }),
      [insecure('tokenUrl', '[fd00::1]', 9)]],
    ['a non-Secure cookie on an https gateway', `server: { baseUrl: "https://gw.example.org" }\nsession: { secret: "${GOOD_SECRET}", cookieSecure: false }`,
      ['session.cookieSecure: is false while server.baseUrl is https: browsers would also send the session cookie over plain http; remove it (auto sets Secure for an https baseUrl) or set it to true (line 2)']],
    // eslint-disable-next-line no-template-curly-in-string -- a ${VAR} in the config text is the case here
    ['the same from a variable', 'server: { baseUrl: "https://gw.example.org" }\nsession: { cookieSecure: "${SECURE}" }',
      ['session.cookieSecure: is false while server.baseUrl is https: browsers would also send the session cookie over plain http; remove it (auto sets Secure for an https baseUrl) or set it to true (line 2)']],
  ])('refuses %s', (_name, text, expected) => {
    expect(problems(text, { SECURE: 'false' })).toEqual(expected)
  })

  it.each([
    ['a 32-character hex secret (openssl rand -hex 16)', `session: { secret: "${'3f9c1ab27e0d48c6b5a1e2f7d9043c8b'}" }`],
    ['a base64 secret (openssl rand -base64 32)', `session: { secret: "${GOOD_SECRET}" }`],
    ['the test suite\'s secret', `session: { secret: "${TEST_SECRET}" }`],
    ['http endpoints on loopback hosts', withProvider({ authorizeUrl: 'http://localhost:9000/auth', tokenUrl: 'http://127.0.0.2:9000/token', userinfoUrl: 'http://[::1]:9000/me' })],
    ['an http issuer on a *.localhost name', withProvider({ issuer: 'http://auth.localhost:9000', scope: 'openid' })],
    ['remote http endpoints with the explicit opt-in', withProvider({ authorizeUrl: 'http://op.internal/auth', tokenUrl: 'http://op.internal/token', dangerouslyAllowInsecureHttp: true })],
    ['a non-Secure cookie on an http gateway', 'server: { baseUrl: "http://gw.internal:8080" }\nsession: { cookieSecure: false }'],
  ])('accepts %s', (_name, text) => {
    expect(problems(text)).toEqual([])
  })

  it('accepts any freshly generated hex or base64 secret', () => {
    // The judgement itself for 2,000 of each (a whole config read for every one cost seconds),
    // and the same through the config for a few.
    const fresh = () => [randomBytes(16).toString('hex'), randomBytes(32).toString('base64')]
    for (let i = 0; i < 2000; i++) expect(fresh().map(secretProblem)).toEqual([undefined, undefined])
    for (let i = 0; i < 10; i++) {
      for (const secret of fresh()) expect(problems(`session: { secret: "${secret}" }`)).toEqual([])
    }
  })

  it('accepts the secrets the repository itself ships (bench, compose, scripts)', () => {
    const found = [
      /BENCH_SESSION_SECRET = '([^']+)'/.exec(readFileSync('bench/targets.ts', 'utf8'))![1]!,
      /GATEWAY_SESSION_SECRET:-([^}]+)\}/.exec(readFileSync('docker-compose.yml', 'utf8'))![1]!,
      /GATEWAY_SESSION_SECRET=(\S+)/.exec(readFileSync('scripts/docker-image-check.sh', 'utf8'))![1]!,
    ]
    for (const secret of found) expect(problems(`session: { secret: "${secret}" }`), secret).toEqual([])
  })
})

describe('warnings: allowed, but said out loud', () => {
  const route = (publicRules: string[], path = '/app/') => ({ path, upstream: 'http://127.0.0.1:9100', provider: 'p', public: publicRules })
  const warnings = (routes: unknown[], provider: Record<string, unknown> = {}) => configWarnings(parseConfig(stringify({
    session: { secret: GOOD_SECRET },
    providers: { p: { clientId: 'c', clientSecret: 's', scope: 'read', authorizeUrl: 'https://op.example.org/a', tokenUrl: 'https://op.example.org/t', ...provider } },
    routes,
  }), {}))

  it.each([
    ['"* *"', ['* *'], ['routes[0].public: "* *" makes every request under /app/ public, whatever its method, with no sign-in; narrow the glob (such as "GET /app/static/*") or set auth: none if that is meant']],
    ['"* /app/*"', ['* /app/*'], ['routes[0].public: "* /app/*" makes every request under /app/ public, whatever its method, with no sign-in; narrow the glob (such as "GET /app/static/*") or set auth: none if that is meant']],
    ['"GET /app/*" and "HEAD /*"', ['GET /app/*', 'HEAD /*', 'GET /app/static/*'], ['routes[0].public: "GET /app/*", "HEAD /*" make every GET and HEAD request under /app/ public, with no sign-in; narrow the globs (such as "GET /app/static/*") or set auth: none if that is meant']],
  ])('warns that %s opens the whole route, naming the methods', (_name, rules, expected) => {
    expect(warnings([route(rules)])).toEqual(expected)
  })

  it('does not warn for narrow globs, CORS preflights, or routes without sign-in', () => {
    expect(warnings([route(['GET /app/static/*', 'OPTIONS *', 'GET /app/x*'])])).toEqual([])
    expect(warnings([{ path: '/open/', upstream: 'http://127.0.0.1:9100', auth: 'none', public: ['* *'] }])).toEqual([])
  })

  it('warns about the insecure-http opt-in, naming the provider', () => {
    expect(warnings([{ path: '/app/', upstream: 'http://127.0.0.1:9100', provider: 'p' }], { dangerouslyAllowInsecureHttp: true })).toEqual([
      'providers.p.dangerouslyAllowInsecureHttp is true: provider p may be reached over plain http, where its tokens and client secret can be read or changed on the network',
    ])
  })

  it('--check prints warnings to stderr and exits 0; problems exit 1', async () => {
    const run = promisify(execFile)
    const dir = await mkdtemp(join(tmpdir(), 'gw-unsafe-'))
    await writeFile(join(dir, 'warn.yaml'), stringify({
      session: { secret: GOOD_SECRET },
      store: { type: 'redis' },
      providers: { p: { clientId: 'c', clientSecret: 's', scope: 'read', authorizeUrl: 'https://op.example.org/a', tokenUrl: 'https://op.example.org/t' } },
      routes: [route(['* *'])],
    }))
    await writeFile(join(dir, 'weak.yaml'), `session: { secret: "${'ab'.repeat(20)}" }\n`)
    // Whether this machine is a container is not what this test is about (its upstream is loopback).
    const ok = await run('node', ['dist/src/main.js', '--check', '--config', join(dir, 'warn.yaml')], { env: { ...process.env, GATEWAY_IN_CONTAINER: 'false' } })
    expect(ok.stdout).toContain('warn.yaml: OK')
    expect(ok.stderr).toBe('warning: routes[0].public: "* *" makes every request under /app/ public, whatever its method, with no sign-in; narrow the glob (such as "GET /app/static/*") or set auth: none if that is meant\n')
    const weak = await run('node', ['dist/src/main.js', '--check', '--config', join(dir, 'weak.yaml')]).catch((e: unknown) => e)
    expect(weak).toMatchObject({ code: 1 })
    expect((weak as { stderr: string }).stderr).toContain('session.secret: is a 2-character pattern repeated')
  })

  it('start-up logs each warning at warn level', async () => {
    const gateway = await startGateway({
      providers: { p: { clientId: 'c', clientSecret: 's', scope: 'read', authorizeUrl: 'http://op.internal/a', tokenUrl: 'http://op.internal/t', dangerouslyAllowInsecureHttp: true } },
      routes: [route(['* *'])],
    }, { listen: false })
    await gateway.close()
    const warned = gateway.logs.map((line) => JSON.parse(line) as { level: number, msg: string }).filter((line) => line.level === 40).map((line) => line.msg)
    expect(warned).toContain('providers.p.dangerouslyAllowInsecureHttp is true: provider p may be reached over plain http, where its tokens and client secret can be read or changed on the network')
    expect(warned.filter((msg) => msg.startsWith('routes[0].public:'))).toHaveLength(1)
  })
})

describe('endpoints found by OIDC discovery follow the same rule', () => {
  let discovery: { url: string, close (): Promise<void> }

  beforeAll(async () => {
    // An issuer on loopback whose discovery document points at endpoints on a remote host over http.
    const server = createServer((req, res) => {
      const issuer = `http://127.0.0.1:${(server.address() as { port: number }).port}`
      if (req.url !== '/.well-known/openid-configuration') {
        res.writeHead(404).end()
        return
      }
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({
        issuer,
        authorization_endpoint: 'http://login.example.test/authorize',
        token_endpoint: `${issuer}/token`,
        jwks_uri: `${issuer}/jwks`,
        response_types_supported: ['code'],
      }))
    })
    discovery = { url: await listen(server), close: () => close(server) }
  })

  afterAll(async () => { await discovery?.close() })

  const provider = (extra: Record<string, unknown> = {}) => ({ p: { clientId: 'c', clientSecret: 's', scope: 'openid', issuer: discovery.url, ...extra } })

  it('a discovered http endpoint on a remote host makes sign-in answer 502 provider_unavailable, logged once with the reason', async () => {
    const gateway = await startGateway({ providers: provider() })
    try {
      const reason = 'the discovery document gives authorization_endpoint over plain http to "login.example.test", which is not a loopback host (set providers.p.dangerouslyAllowInsecureHttp: true to allow it)'
      const logged = () => gateway.logs.filter((line) => (JSON.parse(line) as { reason?: string }).reason === reason)
      await waitFor(async () => logged().length > 0, 5000, 'the discovery failure to be logged')
      const response = await fetch(`${gateway.url}/oauth/login/p/`, { redirect: 'manual', headers: { accept: 'application/json' } })
      expect(response.status).toBe(502)
      expect(await response.json()).toMatchObject({ error: 'provider_unavailable' })
      expect(logged()).toHaveLength(1)
    } finally {
      await gateway.close()
    }
  })

  it('with the opt-in, the discovered endpoint is used', async () => {
    const gateway = await startGateway({ providers: provider({ dangerouslyAllowInsecureHttp: true }) })
    try {
      const response = await fetch(`${gateway.url}/oauth/login/p/`, { redirect: 'manual' })
      expect(response.status).toBe(302)
      expect(response.headers.get('location')).toMatch(/^http:\/\/login\.example\.test\/authorize\?/)
    } finally {
      await gateway.close()
    }
  })
})

describe('more unsafe settings refused, each naming its key', () => {
  const bare = (problem: string) => problem.replace(/ \(line \d+\)$/, '')

  describe('forwardAuth.allowedRedirectHosts: a public suffix (the Public Suffix List) is refused', () => {
    const hosts = (list: string[]) => configProblems(stringify({ session: { secret: GOOD_SECRET }, forwardAuth: { allowedRedirectHosts: list } })).map(bare)
    const suffix = (entry: string) => `forwardAuth.allowedRedirectHosts[0]: ${JSON.stringify(entry)} is a public suffix (in the Public Suffix List): strangers own hosts under it; name your own domain, such as .example.com`

    it.each([
      ['.github.io'], ['github.io'], ['.co.uk'], ['co.uk'], ['.CO.UK'], ['.s3.amazonaws.com'], ['.blogspot.com'], ['.herokuapp.com'],
      ['.vercel.app'], ['.com.au'], ['.github.io:443'], ['co.uk:8443'], ['.pages.dev'], ['.appspot.com'],
    ])('refuses %s', (entry) => {
      expect(hosts([entry])).toEqual([suffix(entry)])
    })

    it.each([
      ['.example.com'], ['app.example.com'], ['alice.github.io'], ['.alice.github.io'], ['example.co.uk'], ['.example.co.uk'],
      ['127.0.0.1:9000'], ['10.0.0.5'], ['localhost'], ['localhost:8443'], ['intranet'], ['.corp.internal'], ['app.example.org:8443'],
    ])('accepts %s', (entry) => {
      expect(hosts([entry])).toEqual([])
    })
  })

  describe('identity header names HTTP gives a meaning are refused', () => {
    const named = (user: string) => configProblems(stringify({
      session: { secret: GOOD_SECRET },
      routes: [{ path: '/app/', upstream: 'http://127.0.0.1:9100', auth: 'none', identityHeaders: { user } }],
    })).map(bare)
    const refused = (name: string, as: string) => `routes[0].identityHeaders.user: must not be ${JSON.stringify(name)}, a header HTTP itself gives a meaning (the upstream would read the identity as its ${as}): name a header of your own, such as X-Forwarded-User`

    it.each([
      ['Host', 'host'], ['host', 'host'], ['HOST', 'host'], ['Authorization', 'authorization'], ['Cookie', 'cookie'],
      ['Content-Length', 'content-length'], ['Transfer-Encoding', 'transfer-encoding'], ['Connection', 'connection'], ['Keep-Alive', 'keep-alive'], ['TE', 'te'],
      ['Trailer', 'trailer'], ['Upgrade', 'upgrade'], ['Proxy-Authorization', 'proxy-authorization'], ['Proxy-Connection', 'proxy-connection'],
      ['Proxy-Authenticate', 'proxy-authenticate'],
    ])('refuses %s', (name, as) => {
      expect(named(name)).toEqual([refused(name, as)])
    })

    it.each([['X-Forwarded-User'], ['X-User'], ['Remote-User-Name'], ['X-Host'], ['Hosts'], ['X-Authorization-User']])('accepts %s', (name) => {
      expect(named(name)).toEqual([])
    })

    it('checks the assertion header as well', () => {
      expect(configProblems(stringify({ assertion: { header: 'Transfer-Encoding' } })).map(bare)).toEqual([
        'assertion.header: must not be "Transfer-Encoding", a header HTTP itself gives a meaning (the upstream would read the identity as its transfer-encoding): name a header of your own, such as X-Forwarded-User',
      ])
    })

    it('checks email and groups as well', () => {
      const problems = configProblems(stringify({
        routes: [{ path: '/app/', upstream: 'http://127.0.0.1:9100', auth: 'none', identityHeaders: { email: 'Cookie', groups: 'Connection' } }],
      })).map(bare)
      expect(problems.map((problem) => problem.slice(0, problem.indexOf(':')))).toEqual(['routes[0].identityHeaders.email', 'routes[0].identityHeaders.groups'])
    })
  })

  describe('identity header names with "_" or "." are refused (CGI reads a client\'s "-" spelling as the same variable)', () => {
    const named = (user: string) => configProblems(stringify({
      session: { secret: GOOD_SECRET },
      routes: [{ path: '/app/', upstream: 'http://127.0.0.1:9100', auth: 'none', identityHeaders: { user } }],
    })).map(bare)
    const refused = (where: string, name: string) => `${where}: must be a header name of letters, digits and "-" only (CGI, WSGI and PHP read "_" and "." as "-", so a client could send the same header in another spelling), got ${JSON.stringify(name)}`

    it.each([['X_App_User'], ['x_app_user'], ['X.App.User'], ['X-App_User'], ['content_length'], ['Transfer_Encoding'], ['X-App-User.']])('refuses %s', (name) => {
      expect(named(name)).toEqual([refused('routes[0].identityHeaders.user', name)])
    })

    it('refuses them for the assertion header too', () => {
      expect(configProblems(stringify({ assertion: { header: 'X_Gateway_Assertion' } })).map(bare)).toEqual([refused('assertion.header', 'X_Gateway_Assertion')])
    })
  })

  describe('trustProxy ranges that take in a large part of the internet are refused', () => {
    const trusting = (ranges: string[]) => configProblems(stringify({ session: { secret: GOOD_SECRET }, server: { trustProxy: ranges } })).map(bare)
    const wide = (i: number, range: string, least: number) => `server.trustProxy[${i}]: ${JSON.stringify(range)} trusts X-Forwarded-For from a large part of the internet (a range shorter than /${least}): any client could pick its own address; list the addresses or ranges of your proxies, such as 10.0.0.0/8`

    it.each([
      [['0.0.0.0/0'], [wide(0, '0.0.0.0/0', 8)]],
      [['::/0'], [wide(0, '::/0', 7)]],
      [['0.0.0.0/1', '128.0.0.0/1'], [wide(0, '0.0.0.0/1', 8), wide(1, '128.0.0.0/1', 8)]],
      [['10.0.0.0/7'], [wide(0, '10.0.0.0/7', 8)]],
      [['2000::/3'], [wide(0, '2000::/3', 7)]],
      [['::ffff:0.0.0.0/96'], [wide(0, '::ffff:0.0.0.0/96', 104)]],
      [['::FFFF:10.0.0.0/100'], [wide(0, '::FFFF:10.0.0.0/100', 104)]],
      [['0:0:0:0:0:ffff:0:0/96'], [wide(0, '0:0:0:0:0:ffff:0:0/96', 104)]],
      [['::/80'], [wide(0, '::/80', 104)]],
    ])('refuses %j', (ranges, expected) => {
      expect(trusting(ranges)).toEqual(expected)
    })

    it.each([[['10.0.0.0/8']], [['fc00::/7']], [['::ffff:10.0.0.0/104']], [['192.168.0.0/16', '127.0.0.1', 'loopback', 'uniquelocal']], [['203.0.113.7']]])('accepts %j', (ranges) => {
      expect(trusting(ranges)).toEqual([])
    })
  })

  describe('server.trustProxy: true only on a loopback listener', () => {
    const server = (fields: Record<string, unknown>) => configProblems(stringify({ server: fields })).map(bare)
    const refused = (host: string) => `server.trustProxy: true believes X-Forwarded-For from every client, as server.host ${JSON.stringify(host)} is not loopback: any client could pick its own address (and a fresh sign-in budget); list the addresses or CIDR ranges of your proxies instead, such as ["10.0.0.0/8"]`

    it.each([
      [{ trustProxy: true }, '0.0.0.0'], // the default: every interface
      [{ trustProxy: 'true', host: '0.0.0.0' }, '0.0.0.0'],
      [{ trustProxy: true, host: '::' }, '::'],
      [{ trustProxy: true, host: '10.0.0.5' }, '10.0.0.5'],
      [{ trustProxy: true, host: 'gateway.internal' }, 'gateway.internal'],
      [{ trustProxy: true, host: 'localhost.example.org' }, 'localhost.example.org'],
    ])('refuses %j', (fields, host) => {
      expect(server(fields)).toEqual([refused(host)])
    })

    it.each([
      [{ trustProxy: true, host: '127.0.0.1' }], [{ trustProxy: true, host: '::1' }], [{ trustProxy: true, host: 'localhost' }],
      [{ trustProxy: ['10.0.0.0/8'] }], [{ trustProxy: 'loopback' }], [{ trustProxy: false }],
    ])('accepts %j', (fields) => {
      expect(server(fields)).toEqual([])
    })
  })

  it('a scope without openid beside an issuer is a warning naming the provider; with openid, or without an issuer, none', () => {
    const warnings = (provider: Record<string, unknown>) => configWarnings(parseConfig(stringify({
      session: { secret: GOOD_SECRET },
      providers: { p: { clientId: 'c', clientSecret: 's', ...provider } },
      routes: [{ path: '/app/', upstream: 'http://127.0.0.1:9100', provider: 'p' }],
    }), {}))
    expect(warnings({ issuer: 'https://op.example.org', scope: 'profile email' })).toEqual([
      expect.stringMatching(/^providers\.p\.scope has no openid beside an issuer: no ID token is asked for, .* add openid to the scope, unless p is a plain OAuth 2\.0 server/),
    ])
    expect(warnings({ issuer: 'https://op.example.org', scope: 'openid email' })).toEqual([])
    expect(warnings({ scope: 'read', authorizeUrl: 'https://op.example.org/a', tokenUrl: 'https://op.example.org/t' })).toEqual([])
  })

  // An outside tester's finding: with the sign-in budget off, 700 cookieless form POSTs from one
  // address were all kept, and nothing said so.
  it('preserveBody with rateLimit.login off is a warning naming the route', () => {
    const config = (login: string | undefined) => parseConfig(stringify({
      session: { secret: GOOD_SECRET },
      ...(login === undefined ? {} : { rateLimit: { login } }),
      providers: { p: { clientId: 'c', clientSecret: 's', scope: 'read', authorizeUrl: 'https://op.example.org/a', tokenUrl: 'https://op.example.org/t' } },
      routes: [{ path: '/app/', upstream: 'http://127.0.0.1:9100', provider: 'p', preserveBody: '64KiB' }],
    }), {})
    expect(configWarnings(config('off'))).toEqual([expect.stringMatching(/^routes\[0\]\.preserveBody with rateLimit\.login off: nothing bounds the forms strangers can have kept \(up to 65536 bytes each/)])
    expect(configWarnings(config(undefined))).toEqual([])
  })

  it('pkce: false is a warning naming the key', () => {
    const config = parseConfig(stringify({
      session: { secret: GOOD_SECRET },
      providers: { p: { clientId: 'c', clientSecret: 's', scope: 'read', authorizeUrl: 'https://op.example.org/a', tokenUrl: 'https://op.example.org/t', pkce: false } },
      routes: [{ path: '/app/', upstream: 'http://127.0.0.1:9100', provider: 'p' }],
    }), {})
    expect(configWarnings(config)).toEqual([
      'providers.p.pkce is false: a stolen authorization code can be exchanged without the verifier only this browser\'s sign-in holds; remove it unless the provider refuses PKCE',
    ])
  })
})
