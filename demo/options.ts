// What `npm run demo` and `npm run demo:provider` are told: their flags and DEMO_* variables, read
// once and checked, so that a mistake is one line naming the flag or variable, not a stack trace.

/** The client the demo's authorization server registers for the gateway (gateway.yaml's defaults). */
export const DEMO_CLIENT_ID = 'demo-client'
export const DEMO_CLIENT_SECRET = 'demo-secret-change-me'
/** The provider's name in gateway.yaml: part of every callback address the client registers. */
export const DEMO_PROVIDER = 'demo'
/** The access token lifetime of the demo's machine tokens when `--token-ttl` is not given (seconds). */
const DEFAULT_TOKEN_TTL = 3600
/** Where an operator's own gateway listens by default (docs/getting-started.md): both loopback spellings. */
const DEFAULT_GATEWAY_URLS = ['http://localhost:8080', 'http://127.0.0.1:8080']

export const USAGE = `usage: npm run demo [-- flags]            the gateway, a local provider and a sample app
       npm run demo:provider [-- flags]   the local provider and the sample app, for your own gateway

flags:
  --without-gateway       start no gateway (what demo:provider does)
  --gateway-url <url>     your gateway's base URL, allowed as the client's callback
                          (default http://localhost:8080 and http://127.0.0.1:8080; env DEMO_GATEWAY_URL)
  --remember-sign-in      the provider keeps its own sign-in, as real providers do (the default;
                          env DEMO_PROVIDER_REMEMBER=1)
  --no-remember-sign-in   the provider asks for a user name at every sign-in (env DEMO_PROVIDER_REMEMBER=0)
  --forward-auth <proxy>  caddy or nginx in front of the sample app, asking the gateway before each
                          request (docs/forward-auth.md's files, as shipped): open the app at the
                          address it prints (env DEMO_FRONT_PORT, 8081)
  --token-ttl <duration>  lifetime of the machine client's access tokens: 30s, 5m, 1h or seconds
                          (default 1h; env DEMO_TOKEN_TTL); a short one shows an expired token's answer
  --help                  this text

environment: DEMO_ISSUER_PORT (9000), DEMO_APP_PORT (9100), DEMO_GATEWAY_PORT (8080), DEMO_FRONT_PORT
(--forward-auth's proxy, 8081): 0 picks a free port for any of them; DEMO_HOST (listen address,
127.0.0.1), DEMO_PUBLIC_ISSUER (the issuer URL when it is published at another address), DEMO_TOKEN_TTL (--token-ttl), DEMO_CLIENT_SECRET (default ${DEMO_CLIENT_SECRET}), REDIS_URL (the demo's gateway
keeps sessions in Redis)
`

export interface DemoOptions {
  help: boolean
  withGateway: boolean
  /** Base URLs of the gateways the client may return to (no trailing slash). */
  gatewayUrls: string[]
  clientSecret: string
  /** The provider keeps its own sign-in (single sign-on, RP-initiated logout, account chooser). */
  rememberSignIn: boolean
  /** Lifetime of the machine client's access tokens, in seconds. */
  tokenTtl: number
  /** The proxy to put in front of the sample app with the gateway's forward-auth, if any. */
  forwardAuth?: 'caddy' | 'nginx'
}

/** A mistake in the flags or DEMO_* variables, or a port taken: the message is the whole line to show. */
export class DemoUsageError extends Error {}

/**
 * A gateway's base URL as the client registers it: http(s), nothing after the host and port, since
 * the callback is `<url>/oauth/authorized/demo/` and a browser must reach it.
 */
export function gatewayUrl (value: string, source: string): string {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new DemoUsageError(`${source} must be a URL such as http://localhost:8080, got ${JSON.stringify(value)}`)
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username !== '' || url.password !== '' ||
    url.search !== '' || url.hash !== '' || url.pathname.replace(/\/+$/, '') !== '' || value.includes('#') || value.includes('?')) {
    throw new DemoUsageError(`${source} must be a gateway's base URL, http(s)://host[:port] with nothing after it, got ${JSON.stringify(value)}`)
  }
  return url.origin
}

/** `--token-ttl`'s value in seconds: a whole number of seconds, minutes or hours, from 1 s to 24 h. */
export function tokenTtl (value: string, source: string): number {
  const match = /^([1-9][0-9]{0,5})([smh]?)$/.exec(value)
  const seconds = match === null ? NaN : Number(match[1]) * ({ '': 1, s: 1, m: 60, h: 3600 } as const)[match[2] as '' | 's' | 'm' | 'h']
  if (!(seconds <= 86_400)) throw new DemoUsageError(`${source} must be a duration from 1s to 24h, such as 30s, 5m or 1h, got ${JSON.stringify(value)}`)
  return seconds
}

function rememberFromEnv (value: string | undefined): boolean {
  if (value === undefined || value === '' || value === '1') return true
  if (value === '0') return false
  throw new DemoUsageError(`DEMO_PROVIDER_REMEMBER must be 1 or 0, got ${JSON.stringify(value)}`)
}

const FLAGS = '--without-gateway, --gateway-url <url>, --forward-auth <proxy>, --token-ttl <duration>, --remember-sign-in, --no-remember-sign-in, --help'
/** The flags that take a value (`--flag value` or `--flag=value`). */
const VALUED = new Set(['--gateway-url', '--forward-auth', '--token-ttl'])

/** The options `argv` (the arguments after the script) and `env` give; throws DemoUsageError. */
export function demoOptions (argv: readonly string[], env: Record<string, string | undefined>): DemoOptions {
  const options: DemoOptions = {
    help: false,
    withGateway: true,
    gatewayUrls: env.DEMO_GATEWAY_URL ? [gatewayUrl(env.DEMO_GATEWAY_URL, 'DEMO_GATEWAY_URL')] : DEFAULT_GATEWAY_URLS,
    clientSecret: env.DEMO_CLIENT_SECRET || DEMO_CLIENT_SECRET,
    rememberSignIn: rememberFromEnv(env.DEMO_PROVIDER_REMEMBER),
    tokenTtl: env.DEMO_TOKEN_TTL ? tokenTtl(env.DEMO_TOKEN_TTL, 'DEMO_TOKEN_TTL') : DEFAULT_TOKEN_TTL,
  }
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i]!.startsWith('--') && argv[i]!.includes('=') ? argv[i]!.split(/=(.*)/s, 2) as [string, string] : [argv[i]!, undefined]
    if (flag === '--help' || flag === '-h') options.help = true
    else if (flag === '--without-gateway') options.withGateway = false
    else if (flag === '--remember-sign-in') options.rememberSignIn = true
    else if (flag === '--no-remember-sign-in') options.rememberSignIn = false
    else if (flag === '--gateway-url') {
      const value = inline ?? argv[++i]
      if (value === undefined) throw new DemoUsageError('--gateway-url needs a URL, such as --gateway-url http://localhost:8080')
      options.gatewayUrls = [gatewayUrl(value, '--gateway-url')]
    } else if (flag === '--forward-auth') {
      const value = inline ?? argv[++i]
      if (value !== 'caddy' && value !== 'nginx') throw new DemoUsageError(`--forward-auth needs caddy or nginx, got ${JSON.stringify(value ?? '')}`)
      options.forwardAuth = value
    } else if (flag === '--token-ttl') {
      const value = inline ?? argv[++i]
      if (value === undefined) throw new DemoUsageError('--token-ttl needs a duration, such as --token-ttl 30s')
      options.tokenTtl = tokenTtl(value, '--token-ttl')
    } else {
      throw new DemoUsageError(`unknown flag ${JSON.stringify(argv[i])}; flags: ${FLAGS}`)
    }
    if (inline !== undefined && !VALUED.has(flag)) throw new DemoUsageError(`${flag} takes no value, got ${JSON.stringify(argv[i])}`)
  }
  if (options.withGateway && argv.some((arg) => arg.startsWith('--gateway-url'))) {
    throw new DemoUsageError('--gateway-url is for your own gateway: use it with --without-gateway (npm run demo:provider)')
  }
  if (!options.withGateway && options.forwardAuth !== undefined) throw new DemoUsageError('--forward-auth puts the demo\'s gateway behind a proxy: leave out --without-gateway')
  return options
}

/** `value` as one shell word, for a line the operator pastes (`export NAME=value`). */
export function shellWord (value: string): string {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll('\'', '\'\\\'\'')}'`
}
