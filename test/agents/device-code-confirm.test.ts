// A device code's confirmation as the store adapter sees it (src/agents/store-adapter.ts), without
// sockets: oidc-provider reads the code, finds it not in flight, and writes it in flight; two people
// who confirm one code at the same moment both read it before either write. The order the test
// gives them is the one a browser cannot be made to hit on demand: the second write after the first.
import { describe, expect, it } from 'vitest'
import type { AdapterPayload } from 'oidc-provider'
import { storeAdapter } from '../../src/agents/store-adapter.js'
import { systemClock } from '../../src/ops/clock.js'
import { Sealer } from '../../src/session/seal.js'
import { MemoryStore } from '../../src/store/memory.js'
import { TEST_SECRET } from '../helpers/gateway.js'

function deviceCodes () {
  const Adapter = storeAdapter(new MemoryStore(), new Sealer(TEST_SECRET), { grantRevoked: async () => {}, unusedClientMs: 60_000, clock: systemClock })
  return new Adapter('DeviceCode')
}

const issued: AdapterPayload = { kind: 'DeviceCode', jti: 'code-1', clientId: 'cli', userCode: 'BCDFGHJK', exp: 0 }

describe('a device code put in flight', () => {
  it('by a second confirmation after the first one\'s write: refused, and the first person\'s record stays', async () => {
    const codes = deviceCodes()
    await codes.upsert('code-1', issued, 600)
    await codes.upsert('code-1', { ...issued, inFlight: true }, 600)
    await expect(codes.upsert('code-1', { ...issued, inFlight: true, deviceInfo: { ip: 'second' } }, 600)).rejects.toMatchObject({ error: 'invalid_request', error_description: 'this code is being used already' })
    expect((await codes.find('code-1'))?.deviceInfo).toBeUndefined()
  })

  it('by oidc-provider\'s later writes (the sign-in behind it, or its end): kept as written', async () => {
    const codes = deviceCodes()
    await codes.upsert('code-1', issued, 600)
    await codes.upsert('code-1', { ...issued, inFlight: true }, 600)
    await codes.upsert('code-1', { ...issued, inFlight: true, accountId: 'alice', grantId: 'grant-1' }, 600)
    expect((await codes.find('code-1'))?.accountId).toBe('alice')
    const stopped = deviceCodes()
    await stopped.upsert('code-1', { ...issued, inFlight: true }, 600)
    await stopped.upsert('code-1', { ...issued, inFlight: true, error: 'access_denied' }, 600)
    expect((await stopped.find('code-1'))?.error).toBe('access_denied')
  })
})
