// `npm run build && node dist/bench/state-and-fetch.js [--iterations N] [--rounds N]`: the two
// places the gateway does by hand what jose and oauth4webapi would do, measured in one process.
//   1. The sign-in `state` (an HS256 JWS): src/oauth/signed-state.ts (node:crypto) against jose's
//      SignJWT + jwtVerify with the same claims and key, sign + verify per iteration.
//   2. A provider call (POST a form, read a small JSON answer) from a local node:http server:
//      src/oauth/provider-http.ts (undici's request on a keep-alive agent) against Node's fetch,
//      which oauth4webapi uses when given no customFetch. The server runs in this process too, so
//      CPU per call includes its part; it is the same for both.
// Rounds alternate the two sides; each figure is the median round. Asserts nothing.
import { jwtVerify, SignJWT } from 'jose'
import { createSecretKey, randomBytes } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { parseArgs } from 'node:util'
import { providerFetch } from '../src/oauth/provider-http.js'
import { openState, signState, stateKey, stateKeyring } from '../src/oauth/signed-state.js'

const { values: args } = parseArgs({ options: { iterations: { type: 'string' }, rounds: { type: 'string' }, calls: { type: 'string' } } })
const ITERATIONS = Number(args.iterations ?? 20_000)
const ROUNDS = Number(args.rounds ?? 7)
const CALLS = Number(args.calls ?? 3_000)

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
const cpuMs = () => { const { user, system } = process.cpuUsage(); return (user + system) / 1000 }

async function timed (run: () => Promise<void>, count: number): Promise<{ wallUs: number, cpuUs: number }> {
  const cpu = cpuMs()
  const start = performance.now()
  await run()
  return { wallUs: (performance.now() - start) * 1000 / count, cpuUs: (cpuMs() - cpu) * 1000 / count }
}

async function stateBench (): Promise<void> {
  const bytes = randomBytes(32)
  const key = stateKey('bench', createSecretKey(bytes))
  const ring = stateKeyring([key])
  const claims = { p: 'demo', next: '/app/', n: randomBytes(32).toString('base64url'), b: randomBytes(32).toString('base64url'), s: 1 }
  const ttlMs = 600_000
  const own = async () => {
    for (let i = 0; i < ITERATIONS; i++) {
      const now = Date.now()
      const opened = openState(ring, signState(key, claims, ttlMs, now), now)
      if (!opened.ok) throw new Error('own state did not open')
    }
  }
  const jose = async () => {
    for (let i = 0; i < ITERATIONS; i++) {
      const iat = Math.floor(Date.now() / 1000)
      const token = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid: 'bench' }).setIssuedAt(iat).setExpirationTime(iat + ttlMs / 1000).sign(bytes)
      await jwtVerify(token, bytes, { algorithms: ['HS256'] })
    }
  }
  await own()
  await jose()
  const results = { own: [] as number[], jose: [] as number[] }
  for (let round = 0; round < ROUNDS; round++) {
    results.own.push((await timed(own, ITERATIONS)).wallUs)
    results.jose.push((await timed(jose, ITERATIONS)).wallUs)
  }
  const own_ = median(results.own)
  const jose_ = median(results.jose)
  console.log(`state sign + verify, ${ITERATIONS} per round, median of ${ROUNDS} rounds`)
  console.log('| code | µs per sign + verify |')
  console.log('|---|---|')
  console.log(`| src/oauth/signed-state.ts (node:crypto) | ${own_.toFixed(1)} |`)
  console.log(`| jose SignJWT + jwtVerify (HS256) | ${jose_.toFixed(1)} |`)
  console.log(`ratio jose / own: ${(jose_ / own_).toFixed(1)}x\n`)
}

async function fetchBench (): Promise<void> {
  const answer = JSON.stringify({ access_token: randomBytes(32).toString('base64url'), token_type: 'Bearer', expires_in: 3600, refresh_token: randomBytes(32).toString('base64url') })
  const server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      res.setHeader('content-type', 'application/json')
      res.end(answer)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`
  const init = () => ({
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
    body: new URLSearchParams({ grant_type: 'authorization_code', code: 'c', redirect_uri: 'http://x/cb', client_id: 'c', client_secret: 's' }),
    signal: AbortSignal.timeout(5000),
  })
  const calls = (call: (url: string, init: RequestInit) => Promise<Response>) => async () => {
    for (let i = 0; i < CALLS; i++) await (await call(url, init())).json()
  }
  const ours = calls(providerFetch)
  const node = calls(fetch)
  await ours()
  await node()
  const results = { ours: [] as Array<{ wallUs: number, cpuUs: number }>, node: [] as Array<{ wallUs: number, cpuUs: number }> }
  for (let round = 0; round < ROUNDS; round++) {
    results.ours.push(await timed(ours, CALLS))
    results.node.push(await timed(node, CALLS))
  }
  server.close()
  const row = (name: string, rounds: Array<{ wallUs: number, cpuUs: number }>) =>
    `| ${name} | ${median(rounds.map((r) => r.cpuUs)).toFixed(0)} | ${median(rounds.map((r) => r.wallUs)).toFixed(0)} |`
  console.log(`provider call (POST form, JSON answer, read), ${CALLS} one after another per round, median of ${ROUNDS} rounds`)
  console.log('| client | CPU µs per call (client + local server) | wall µs per call |')
  console.log('|---|---|---|')
  console.log(row('providerFetch (undici request, keep-alive agent)', results.ours))
  console.log(row('Node fetch (oauth4webapi\'s default)', results.node))
}

await stateBench()
await fetchBench()
