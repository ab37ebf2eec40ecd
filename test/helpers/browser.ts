// A minimal cookie-keeping HTTP client that walks redirects one at a time like a browser, and
// fills in oidc-provider's dev login and consent forms. Real sockets, no interception.

interface StoredCookie { value: string, path: string }

export interface Hop { url: string, status: number, location?: string }

export class Browser {
  readonly cookies = new Map<string, StoredCookie>()
  /** Every response seen, in order (for asserting on intermediate redirects). */
  readonly hops: Hop[] = []

  cookieHeader (url: string): string | undefined {
    const path = new URL(url).pathname
    const pairs = [...this.cookies].filter(([, c]) => path.startsWith(c.path)).map(([name, c]) => `${name}=${c.value}`)
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

  private keep (line: string): void {
    const [pair = '', ...attributes] = line.split(';')
    const name = pair.slice(0, pair.indexOf('=')).trim()
    const value = pair.slice(pair.indexOf('=') + 1).trim()
    const attr = (key: string) => attributes.map((a) => a.trim()).find((a) => a.toLowerCase().startsWith(`${key}=`))?.split('=')[1]
    const expired = attr('max-age') === '0' || (attr('expires') !== undefined && new Date(attr('expires')!).getTime() < Date.now())
    if (expired || value === '') this.cookies.delete(name)
    else this.cookies.set(name, { value, path: attr('path') ?? '/' })
  }

  /**
   * Opens `url` and follows redirects, signing in as `login` and consenting (or rejecting) on the
   * provider's forms, until a response that is neither a redirect nor a provider form.
   */
  async navigate (url: string, options: { login?: string, consent?: boolean, maxSteps?: number } = {}): Promise<Response> {
    let current = url
    let init: RequestInit = {}
    for (let step = 0; step < (options.maxSteps ?? 20); step++) {
      const response = await this.fetch(current, init)
      init = {}
      const location = response.headers.get('location')
      if (response.status >= 300 && response.status < 400 && location) {
        current = new URL(location, current).href
        await response.arrayBuffer()
        continue
      }
      const body = response.headers.get('content-type')?.includes('text/html') ? await response.clone().text() : ''
      const prompt = /name="prompt" value="(\w+)"/.exec(body)?.[1]
      const action = /<form[^>]*action="([^"]+)"/.exec(body)?.[1]
      if (!prompt || !action) return response
      await response.arrayBuffer()
      if (prompt === 'consent' && options.consent === false) {
        current = new URL(`${action}/abort`, current).href
        continue
      }
      const form = new URLSearchParams({ prompt })
      if (prompt === 'login') {
        form.set('login', options.login ?? 'alice')
        form.set('password', 'any')
      }
      current = new URL(action, current).href
      init = { method: 'POST', body: form, headers: { 'content-type': 'application/x-www-form-urlencoded' } }
    }
    throw new Error(`no final page after ${options.maxSteps ?? 20} steps from ${url}`)
  }
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
