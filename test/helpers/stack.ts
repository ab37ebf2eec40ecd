// The shared stack of the test files: the test worker's authorization server and gateway address,
// the file's Redis and echo upstream, and `startStack(raw)` for the file's gateway in front of them.
// A test file that needs a provider, Redis and a gateway takes them from here, as fixtures of this
// `test` (its `test.beforeAll` receives them), instead of starting its own:
//
//   import type { TestGateway } from '../helpers/gateway.js'
//   import { test as it } from '../helpers/stack.js'
//   let gateway: TestGateway
//   it.beforeAll(async ({ startStack, upstream }) => {
//     gateway = await startStack({ routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }] })
//   })
//
// The files of one worker run one after another (vitest.config.ts: isolate: false), so they share
// the worker's provider and the port its client's redirect URI names; each file gets its own Redis
// (test/helpers/redis.ts: a spawned server, or a container a previous file released, emptied; with
// REDIS_URL, that one server) and its own gateway. The gateway is closed when the file ends; a file
// whose afterAll closes its upstreams closes the gateway first there (its fixtures' cleanup runs
// after afterAll), but after a Chromium context. The shared provider asks for the sign-in every
// time (no remembered sign-in, no logout endpoint). `bcl` is the worker's second provider, one that
// signs people out (its sign-in kept, RP-initiated logout, back-channel logout tokens to the
// gateway's provider `bcl`, client `c2`): a file adds `bcl: oidcClient(bcl.issuer, 'c2', 's')` to
// its `providers`. A file that needs a provider otherwise configured (machine clients, its key
// rotated, its request counts read) starts its own with startGatewayWithProvider.
import { test as base, expect } from 'vitest'
import { oidcClient, reserveBaseUrl, startGateway, type StartOptions, type TestGateway } from './gateway.js'
import { gatewayClient, startOidcProvider, type TestProvider } from './oidc.js'
import { startRedis } from './redis.js'
import { startUpstream } from './upstream.js'

/** gateway.yaml for the file's gateway: `routes` required; the provider `demo`, the address and (by default) the file's Redis are filled in. */
export type StackConfig = { routes: unknown[], [key: string]: unknown }

export const test = base
  // eslint-disable-next-line no-empty-pattern -- vitest reads a fixture's dependencies from its first argument's pattern
  .extend('gatewayAddress', { scope: 'worker' }, async ({}) => await reserveBaseUrl())
  .extend('op', { scope: 'worker' }, async ({ gatewayAddress }, { onCleanup }) => {
    // The client's redirect URIs name the provider `demo` and a second name for the same client,
    // `demo-twin` (a file adds it to `providers`): one issuer behind two provider entries.
    const client = gatewayClient(gatewayAddress.baseUrl, 'demo', 'c')
    const op = await startOidcProvider([{ ...client, redirect_uris: [...client.redirect_uris, ...gatewayClient(gatewayAddress.baseUrl, 'demo-twin', 'c').redirect_uris] }])
    onCleanup(async () => { await op.close() })
    return op
  })
  .extend('bcl', { scope: 'worker' }, async ({ gatewayAddress }, { onCleanup }): Promise<TestProvider> => {
    const bcl = await startOidcProvider([gatewayClient(gatewayAddress.baseUrl, 'bcl', 'c2', { backchannel: true })], { logout: true })
    onCleanup(async () => { await bcl.close() })
    return bcl
  })
  // eslint-disable-next-line no-empty-pattern -- as above
  .extend('redis', { scope: 'file' }, async ({}, { onCleanup }) => {
    const redis = await startRedis()
    onCleanup(async () => { await redis.release() })
    return redis
  })
  // eslint-disable-next-line no-empty-pattern -- as above
  .extend('upstream', { scope: 'file' }, async ({}, { onCleanup }) => {
    const upstream = await startUpstream()
    onCleanup(async () => { await upstream.close() })
    return upstream
  })
  .extend('startStack', { scope: 'file' }, async ({ gatewayAddress, op, redis }, { onCleanup }) => {
    onCleanup(closeStackGateway)
    // This file, as the gateway on the worker's address knows its starter.
    const file = { path: expect.getState().testPath ?? 'a test file' }
    return async (raw: StackConfig, options: StartOptions = {}): Promise<TestGateway> => {
      if (stackGateway) {
        if (stackGateway.file === file) throw new Error('startStack: this file\'s gateway is running on the worker\'s address already; close it first, or start another one with startGatewayWithProvider')
        // A file whose afterAll failed never reached its fixtures' cleanup: its gateway still holds the worker's address.
        console.warn(`startStack: closing the gateway that ${stackGateway.file.path} left on the worker's address`)
        await closeStackGateway()
      }
      const starting = startGateway({
        store: { type: 'redis', url: redis.url },
        ...raw,
        server: { ...(raw.server as object | undefined), ...gatewayAddress },
        providers: { demo: oidcClient(op.issuer, 'c', 's'), ...(raw.providers as object | undefined) },
      }, options)
      // Taken before the start is awaited, so that a second call meanwhile meets the guard above.
      stackGateway = { file, gateway: starting }
      let gateway: TestGateway
      try {
        gateway = await starting
      } catch (error) {
        stackGateway = undefined
        throw error
      }
      return { ...gateway, close: closeStackGateway }
    }
  })

/** The gateway on the worker's address, and the file that started it (one at a time: one address). */
let stackGateway: { file: { path: string }, gateway: Promise<TestGateway> } | undefined

/** Closes the gateway on the worker's address, if any; it counts as closed once its close succeeded. */
async function closeStackGateway (): Promise<void> {
  if (!stackGateway) return
  await (await stackGateway.gateway).close()
  stackGateway = undefined
}
