// The session lifecycle attacked from outside: what a stranger or a signed-in person can make
// the gateway do beyond the contract. One gateway on a real Redis and a real authorization server:
// - preserveBody: a form another site makes the browser POST (Lax: no session cookie comes with
//   it) must not come back as a same-origin, signed-in POST after the sign-in (login-assisted CSRF);
// - websockets: a session re-keyed by a second sign-in (Sessions.start) and then signed out must
//   still close its sockets within a second (SPEC "Websockets end with their session");
// - the person index: one browser signing in again and again must not end the person's other,
//   live session (stale entries of re-keyed sessions count toward the 50).
import { createServer } from 'node:http'
import { WebSocket, WebSocketServer } from 'ws'
import { afterAll, describe, expect } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { send, startFormUpstream, type Answer, type FormUpstream } from '../helpers/form-upstream.js'
import { sessionStatus, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'
import { close, listen } from '../helpers/net.js'
import type { TestRedis } from '../helpers/redis.js'
import { settledWithin } from '../helpers/websocket.js'

const URLENCODED = 'application/x-www-form-urlencoded'
const MARKER = 'gateway-preserved-form=1'

let redis: TestRedis
let forms: FormUpstream
const wsServer = createServer((_req, res) => res.end('plain'))
let gateway: TestGateway
const opened: WebSocket[] = []

it.beforeAll(async ({ startStack, redis: fileRedis }) => {
  redis = fileRedis
  forms = await startFormUpstream()
  const wss = new WebSocketServer({ server: wsServer })
  wss.on('connection', (socket) => socket.on('message', (data) => socket.send(`echo ${String(data)}`)))
  const wsUpstream = await listen(wsServer)
  gateway = await startStack({
    store: { type: 'redis', url: redis.url },
    session: { cacheTtl: 0 },
    routes: [
      { path: '/app/', upstream: forms.url, provider: 'demo', preserveBody: '1KiB' },
      { path: '/live/', upstream: wsUpstream, provider: 'demo', websocket: true },
    ],
  })
})

afterAll(async () => {
  for (const socket of opened) socket.close()
  // Before the upstreams: a websocket the gateway still holds would keep wsServer's close waiting.
  await gateway?.close()
  await forms?.close()
  await close(wsServer)
})

/** A browser signed in as `login` (its gateway session cookie is in `browser.cookies`). */
async function signedIn (login: string, browser = new Browser()): Promise<Browser> {
  const page = await browser.navigate(`${gateway.url}/oauth/login/demo/?next=/oauth/`, { login })
  expect(page.status).toBe(200)
  return browser
}

function sessionOf (browser: Browser): string {
  return browser.cookies.get('gw_session')!.value
}

function formCookie (answer: Answer): string | undefined {
  const line = (answer.headers['set-cookie'] ?? []).find((l) => l.startsWith('gw_session_form='))
  return line?.slice('gw_session_form='.length).split(';', 1)[0]
}

describe('preserveBody and a form another site posts', () => {
  it('a cross-site form POST is not kept, so it never reaches the upstream as the signed-in person', async () => {
    // alice is signed in at the gateway and at the provider (silent sign-in).
    const victim = await signedIn('alice')
    const evil = 'title=pwned&comment=transfer+everything+to+mallory'
    // evil.example auto-submits a form to the protected route. SameSite=Lax: the session cookie is
    // not sent with a cross-site POST, so the gateway sees "no session" and would keep the body.
    const posted = await send(`${gateway.url}/app/form?draft=1`, {
      body: evil,
      headers: { 'content-type': URLENCODED, 'sec-fetch-mode': 'navigate', 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' },
    })
    expect(posted.status).toBe(302)
    const token = formCookie(posted)
    if (token !== undefined) victim.cookies.set('gw_session_form', { value: token, path: '/' })
    // The browser follows the redirect: sign-in (silent), callback, and (today) the replay page.
    const page = await victim.navigate(new URL(posted.headers.location!, gateway.url).href, { login: 'alice' })
    const html = page.status === 200 ? await page.text() : ''
    if (html.includes('gateway-preserved-form')) {
      // The page's script submits the marker: a same-origin POST, now with alice's session cookie.
      await send(`${gateway.url}/app/form?draft=1`, {
        body: MARKER,
        headers: { 'content-type': URLENCODED, 'sec-fetch-site': 'same-origin', origin: gateway.url, cookie: victim.cookieHeader(`${gateway.url}/app/`) ?? '' },
      })
    }
    expect(forms.posts.map((post) => post.body.toString('utf8'))).not.toContain(evil)
    // The cause: the cross-site POST was kept at all.
    expect(token).toBeUndefined()
  })
})

describe('websockets of a session re-keyed by a second sign-in', () => {
  it('close within a second when that person then signs out', async () => {
    const browser = await signedIn('carol')
    const socket = new WebSocket(`${gateway.url.replace('http', 'ws')}/live/feed`, { headers: { origin: gateway.url, cookie: `gw_session=${sessionOf(browser)}` } })
    opened.push(socket)
    const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)))
    await new Promise((resolve, reject) => { socket.once('open', resolve); socket.once('error', reject) })
    const echoed = new Promise<string>((resolve) => socket.once('message', (data) => resolve(String(data))))
    socket.send('hi')
    expect(await echoed).toBe('echo hi')
    // The same browser signs in again (a second provider, a step-up, or the same link twice): Sessions.start
    // moves the session to a new id and GETDELs the old one without an "ended" broadcast.
    const before = sessionOf(browser)
    await signedIn('carol', browser)
    expect(sessionOf(browser)).not.toBe(before)
    // Then signs out: the new id ends, and the sockets kept under the old id should close too.
    const out = await browser.fetch(`${gateway.url}/oauth/logout/`, { method: 'POST', body: new URLSearchParams({}), headers: { 'content-type': URLENCODED, 'sec-fetch-site': 'same-origin' } })
    expect(out.status).toBeLessThan(400)
    expect(await settledWithin(closed)).toBe(1008)
  })
})

describe('the person index and a browser that signs in again and again', () => {
  it('does not end the same person\'s other live session', async () => {
    const laptop = await signedIn('dave')
    const phone = await signedIn('dave')
    // Each sign-in again re-keys the phone's session (same createdAt) and adds an entry; the old
    // entries stay until a list prunes them, and the 51st entry drops the lowest score: the laptop.
    for (let i = 0; i < 50; i++) await signedIn('dave', phone)
    expect(await sessionStatus(gateway, sessionOf(phone), '/app/x')).toBe(200)
    expect(await sessionStatus(gateway, sessionOf(laptop), '/app/x')).toBe(200)
  }, 60_000)
})
