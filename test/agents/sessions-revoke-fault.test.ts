// Revoking an agent's access from the sessions page when the store fails a read on the way: a
// re-reading found the grant's label read (for the notice "The agent's access was revoked") between
// taking the entry out of the person's list and ending the grant, so a store error there left the
// agent working and no longer listed. The label is asked once the grant has ended, and its failure
// only changes the notice.
import { Redis } from 'ioredis'
import { describe, expect } from 'vitest'
import { agentGrant } from '../helpers/agent-grant.js'
import { sessionCookie, type TestGateway } from '../helpers/gateway.js'
import { test as it } from '../helpers/stack.js'

let gateway: TestGateway
let redisUrl: string

it.beforeAll(async ({ startStack, upstream, redis }) => {
  redisUrl = redis.url
  gateway = await startStack({ routes: [{ path: '/other/', upstream: upstream.url, provider: 'demo', agents: true }] })
})

describe('revoking an agent\'s access when the store fails the label read', () => {
  it('either ends the grant or leaves it listed (never unlisted and still working)', async () => {
    const { tokens } = await agentGrant(gateway.url, 'revoke-half', `${gateway.url}/other`)
    const bearer = { authorization: `Bearer ${tokens.access_token}` }
    expect((await fetch(`${gateway.url}/other/x`, { headers: bearer })).status).toBe(200)
    const cookie = await sessionCookie(gateway, 'revoke-half')
    const list = async () => (await (await fetch(`${gateway.url}/oauth/sessions/`, { headers: { cookie, accept: 'application/json' } })).json() as { sessions: Array<{ id: string, agent?: unknown }> }).sessions
    const agent = (await list()).find((entry) => entry.agent !== undefined)
    expect(agent).toBeDefined()
    // The label key fails its GET (a store error on that one read).
    const client = new Redis(redisUrl)
    try {
      const keys = await client.keys('*grant-label*')
      expect(keys.length).toBe(1)
      await client.del(keys[0]!)
      await client.rpush(keys[0]!, 'x')
    } finally {
      client.disconnect()
    }
    const revoke = await fetch(`${gateway.url}/oauth/sessions/${agent!.id}/revoke`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie, accept: 'text/html', origin: gateway.url, 'sec-fetch-site': 'same-origin', 'content-type': 'application/x-www-form-urlencoded' },
      body: 'confirm=1',
    })
    const stillWorks = (await fetch(`${gateway.url}/other/x`, { headers: bearer })).status === 200
    const stillListed = (await list()).some((entry) => entry.id === agent!.id)
    // Ended, or (the request failed) still there for the person to revoke again.
    expect({ revokeStatus: revoke.status, stillWorks, stillListed, unlistedButWorking: stillWorks && !stillListed }).toMatchObject({ unlistedButWorking: false })
  })
})
