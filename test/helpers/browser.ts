// A minimal cookie-keeping HTTP client that walks redirects one at a time like a browser, and
// fills in oidc-provider's dev login and consent forms. Real sockets, no interception.
import { request } from 'undici'

interface StoredCookie { value: string, path: string, /** when Max-Age or Expires ends it, on the browser's clock */ expiresAt?: number }

/** One hop of a walk: what `navigate` reads of an answer (its body whole), and the answer as a Response. */
interface Answer { status: number, location: string | undefined, contentType: string | undefined, body: Buffer, response: () => Response }

/** Statuses whose answer has no body (a Response refuses one). */
const NULL_BODY = new Set([101, 204, 205, 304])

export interface Hop { url: string, status: number, location?: string }

export class Browser {
  /** `now`: the browser's clock, which ends its cookies at their Max-Age (a test moves it with the gateway's). */
  constructor (private readonly now: () => number = Date.now) {}

  readonly cookies = new Map<string, StoredCookie>()
  /** Every response seen, in order (for asserting on intermediate redirects). */
  readonly hops: Hop[] = []

  cookieHeader (url: string): string | undefined {
    const path = new URL(url).pathname
    const now = this.now()
    const pairs = [...this.cookies].filter(([, c]) => path.startsWith(c.path) && (c.expiresAt === undefined || c.expiresAt > now)).map(([name, c]) => `${name}=${c.value}`)
    return pairs.length > 0 ? pairs.join('; ') : undefined
  }

  /** One request, no redirect following; Set-Cookie is kept. */
  async fetch (url: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers)
    if (!headers.has('accept')) headers.set('accept', 'text/html,application/xhtml+xml')
    const cookie = this.cookieHeader(url)
    if (cookie) headers.set('cookie', cookie)
    const response = await fetch(url, { ...init, headers, redirect: 'manual' })
    for (const line of response.headers.getSetCookie()) this.keep(line)
    this.hops.push({ url, status: response.status, location: response.headers.get('location') ?? undefined })
    return response
  }

  /**
   * One hop of `navigate`, through undici's `request` rather than `fetch`: a sign-in is a dozen
   * hops, and fetch's Request, Headers and body streams cost about 0.3 ms of CPU each (a fifth of a
   * test sign-in's, measured 2026-11-30). The same cookies, Accept header and record in `hops`.
   */
  private async hop (url: string, form?: URLSearchParams): Promise<Answer> {
    const headers: Record<string, string> = { accept: 'text/html,application/xhtml+xml' }
    if (form) headers['content-type'] = 'application/x-www-form-urlencoded'
    // A browser whose own fetch watches or changes its requests (a subclass) sees every hop.
    if (this.fetch !== Browser.prototype.fetch) {
      const response = await this.fetch(url, form ? { method: 'POST', body: form, headers } : {})
      const body = Buffer.from(await response.clone().arrayBuffer())
      return { status: response.status, location: response.headers.get('location') ?? undefined, contentType: response.headers.get('content-type') ?? undefined, body, response: () => response }
    }
    const cookie = this.cookieHeader(url)
    if (cookie) headers.cookie = cookie
    const answer = await request(url, { method: form ? 'POST' : 'GET', headers, body: form?.toString() })
    const body = Buffer.from(await answer.body.arrayBuffer())
    for (const line of [answer.headers['set-cookie'] ?? []].flat()) this.keep(line)
    const { location, 'content-type': contentType } = answer.headers
    const hop: Answer = {
      status: answer.statusCode,
      location: typeof location === 'string' ? location : undefined,
      contentType: typeof contentType === 'string' ? contentType : undefined,
      body,
      response: () => responseOf(answer.statusCode, answer.headers, body),
    }
    this.hops.push({ url, status: hop.status, location: hop.location })
    return hop
  }

  private keep (line: string): void {
    const [pair = '', ...attributes] = line.split(';')
    const name = pair.slice(0, pair.indexOf('=')).trim()
    const value = pair.slice(pair.indexOf('=') + 1).trim()
    const attr = (key: string) => attributes.map((a) => a.trim()).find((a) => a.toLowerCase().startsWith(`${key}=`))?.split('=')[1]
    const maxAge = attr('max-age')
    const expiresAt = maxAge !== undefined ? this.now() + Number(maxAge) * 1000 : attr('expires') !== undefined ? new Date(attr('expires')!).getTime() : undefined
    if ((expiresAt !== undefined && expiresAt <= this.now()) || value === '') this.cookies.delete(name)
    else this.cookies.set(name, { value, path: attr('path') ?? '/', ...(expiresAt === undefined ? {} : { expiresAt }) })
  }

  /**
   * Opens `url` and follows redirects, signing in as `login` and consenting (or rejecting) on the
   * provider's forms, until a response that is neither a redirect nor a provider form.
   */
  async navigate (url: string, options: { login?: string, consent?: boolean, maxSteps?: number } = {}): Promise<Response> {
    let current = url
    let form: URLSearchParams | undefined
    for (let step = 0; step < (options.maxSteps ?? 20); step++) {
      const answer = await this.hop(current, form)
      form = undefined
      if (answer.status >= 300 && answer.status < 400 && answer.location) {
        current = new URL(answer.location, current).href
        continue
      }
      const body = answer.contentType?.includes('text/html') === true ? answer.body.toString() : ''
      const prompt = /name="prompt" value="(\w+)"/.exec(body)?.[1]
      const action = /<form[^>]*action="([^"]+)"/.exec(body)?.[1]
      if (!prompt || !action) return answer.response()
      if (prompt === 'consent' && options.consent === false) {
        current = new URL(`${action}/abort`, current).href
        continue
      }
      form = new URLSearchParams({ prompt })
      if (prompt === 'login') {
        form.set('login', options.login ?? 'alice')
        form.set('password', 'any')
      }
      current = new URL(action, current).href
    }
    throw new Error(`no final page after ${options.maxSteps ?? 20} steps from ${url}`)
  }
}

/** An answer of undici's `request` as the Response a caller reads. */
function responseOf (status: number, fields: Record<string, string | string[] | undefined>, body: Buffer): Response {
  const headers = new Headers()
  for (const [name, value] of Object.entries(fields)) {
    for (const one of [value ?? []].flat()) headers.append(name, one)
  }
  return new Response(NULL_BODY.has(status) ? null : body, { status, headers })
}

/** A browser that has signed in, what it landed on, and its session cookie. */
export interface SignedIn {
  readonly browser: Browser
  /** The page it landed on (200). */
  readonly response: Response
  /** The session cookie's value. */
  readonly value: string
  /** The session cookie as a Cookie header: `<name>=<value>`. */
  readonly cookie: string
}

/**
 * The one way a test signs a person in through the real provider: a new browser opens `url` (a
 * protected path, or a login URL with `?next=`), signs in as `login` on the provider's form and
 * consents, and must land with 200 holding the session cookie.
 */
export async function signIn (url: string, login?: string, cookieName = 'gw_session'): Promise<SignedIn> {
  const browser = new Browser()
  const response = await browser.navigate(url, login === undefined ? {} : { login })
  if (response.status !== 200) throw new Error(`signing in at ${url} landed with ${response.status}, not 200`)
  const value = browser.cookies.get(cookieName)?.value
  if (value === undefined) throw new Error(`signing in at ${url} left no ${cookieName} cookie`)
  return { browser, response, value, cookie: `${cookieName}=${value}` }
}
