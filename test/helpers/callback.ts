// Walks a sign-in like `Browser.navigate` (gateway login, provider sign-in and consent forms) but
// stops before the gateway's callback, so a test can send the callback as it is, or altered
// (a parameter removed, changed or repeated), and read the callback's own answer.
import type { Browser } from './browser.js'

/**
 * The callback URL the provider sends the browser to at the end of a sign-in started at `start`
 * (not yet requested). Throws when the walk ends anywhere else. `callbackOrigin`: the gateway's
 * public address, when `start` is one instance's own (several instances behind one `baseUrl`).
 */
export async function reachCallback (browser: Browser, start: string, options: { login?: string, callbackPath?: string, callbackOrigin?: string } = {}): Promise<URL> {
  const callbackPath = options.callbackPath ?? '/oauth/authorized/'
  const gatewayOrigin = options.callbackOrigin ?? new URL(start).origin
  let current = start
  let init: RequestInit = {}
  for (let step = 0; step < 20; step++) {
    const response = await browser.fetch(current, init)
    init = {}
    const location = response.headers.get('location')
    if (response.status >= 300 && response.status < 400 && location) {
      await response.arrayBuffer()
      const next = new URL(location, current)
      if (next.origin === gatewayOrigin && next.pathname.startsWith(callbackPath)) return next
      current = next.href
      continue
    }
    const body = response.headers.get('content-type')?.includes('text/html') ? await response.text() : ''
    const prompt = /name="prompt" value="(\w+)"/.exec(body)?.[1]
    const action = /<form[^>]*action="([^"]+)"/.exec(body)?.[1]
    if (!prompt || !action) throw new Error(`the sign-in from ${start} ended at ${current} with ${response.status}, not at the callback`)
    const form = new URLSearchParams({ prompt })
    if (prompt === 'login') form.set('login', options.login ?? 'alice')
    current = new URL(action, current).href
    init = { method: 'POST', body: form, headers: { 'content-type': 'application/x-www-form-urlencoded' } }
  }
  throw new Error(`no callback after 20 steps from ${start}`)
}
