// `npm run demo` stops everything it started when npm itself gets SIGINT (Ctrl-C in a terminal
// signals the whole foreground group; a process manager or `kill -INT` signals only npm): the
// gateway, the authorization server and the sample app all stop answering, and npm exits.
import { spawn } from 'node:child_process'
import { expect, it } from 'vitest'
import { freePort } from './helpers/net.js'

it('npm run demo: a SIGINT to the npm process stops the gateway, the authorization server and the sample app', async () => {
  const npm = spawn('npm', ['run', 'demo', '--silent'], {
    env: { ...process.env, DEMO_GATEWAY_PORT: String(await freePort()), DEMO_ISSUER_PORT: '0', DEMO_APP_PORT: '0', REDIS_URL: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  const urls = await new Promise<string[]>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the demo printed no URL within 30 s:\n${output}`)), 30_000)
    const read = (chunk: Buffer) => {
      output += chunk.toString()
      if (/Open (http\S+) in a browser/.test(output)) {
        clearTimeout(timer)
        resolve([...output.matchAll(/(?:gateway|authorization server|sample app)\s+(http\S+)/g)].map((match) => match[1]!))
      }
    }
    npm.stdout.on('data', read)
    npm.stderr.on('data', read)
    npm.once('exit', (code) => reject(new Error(`npm exited (${code}):\n${output}`)))
  })
  expect(urls).toHaveLength(3)
  for (const url of urls) expect((await fetch(url, { redirect: 'manual' })).status).toBeLessThan(500)

  const exited = new Promise<number | null>((resolve) => npm.once('exit', resolve))
  npm.kill('SIGINT')
  expect(await exited).toBe(0)
  for (const url of urls) {
    await expect(fetch(url, { signal: AbortSignal.timeout(2000) }), `${url} after SIGINT`).rejects.toThrow()
  }
}, 60_000)
