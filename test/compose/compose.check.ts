// Walks a sign-in through the running compose stack (scripts/compose-check.sh brings it up and
// passes COMPOSE_GATEWAY_URL and COMPOSE_PROJECT), then restarts Redis and the gateway and checks
// that the session survived both.
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { Browser } from '../helpers/browser.js'
import { waitFor } from '../helpers/net.js'

const gatewayUrl = process.env.COMPOSE_GATEWAY_URL
const project = process.env.COMPOSE_PROJECT
if (!gatewayUrl || !project) throw new Error('run through scripts/compose-check.sh: COMPOSE_GATEWAY_URL and COMPOSE_PROJECT are not set')

const compose = (...args: string[]) => promisify(execFile)('docker-compose', ['-p', project, ...args])

async function page (browser: Browser): Promise<string> {
  const response = await browser.fetch(`${gatewayUrl}/app/`)
  expect(response.status).toBe(200)
  return await response.text()
}

describe('the compose stack', () => {
  it('signs in through the gateway container to the demo app, and the session survives restarts', async () => {
    const browser = new Browser()
    const landed = await browser.navigate(`${gatewayUrl}/app/`, { login: 'carol' })
    expect(landed.status).toBe(200)
    expect(await landed.text()).toContain('Hello, Carol')

    await compose('restart', 'redis')
    await waitFor(async () => (await fetch(`${gatewayUrl}/readyz`)).ok, 20_000, 'the gateway to reach Redis again')
    expect(await page(browser)).toContain('Hello, Carol')

    await compose('restart', 'gateway')
    await waitFor(async () => (await fetch(`${gatewayUrl}/readyz`)).ok, 20_000, 'the gateway to come back')
    expect(await page(browser)).toContain('Hello, Carol')
  }, 90_000)
})
