// The shared stack of the test files: the test worker's authorization server and gateway address,
// the file's Redis and echo upstream, and `startStack(raw)` for the file's gateway in front of them.
// A test file that needs a provider, Redis and a gateway takes them from here, as fixtures of this
// `test` (its `test.beforeAll` receives them), instead of starting its own:
//
//   import { test as it } from '../helpers/stack.js'
//   let gateway: TestGateway
//   it.beforeAll(async ({ startStack, upstream }) => {
//     gateway = await startStack({ routes: [{ path: '/app/', upstream: upstream.url, provider: 'demo' }] })
//   })
//
// The files of one worker run one after another (vitest.config.ts: isolate: false), so they share
// the worker's provider and the port its client's redirect URI names; each file gets a Redis of its
// own (test/helpers/redis.ts hands it one a previous file released, emptied) and its own gateway,
// closed when the file ends. A file that needs the provider otherwise configured (machine clients,
// its key rotated, its request counts read) starts its own with startGatewayWithProvider.
import { test as base } from 'vitest'
import { oidcClient, reserveBaseUrl, startGateway, type StartOptions, type TestGateway } from './gateway.js'
import { gatewayClient, startOidcProvider } from './oidc.js'
import { startRedis } from './redis.js'
import { startUpstream } from './upstream.js'

/** gateway.yaml for the file's gateway: `routes` required; the provider `demo`, the address and (by default) the file's Redis are filled in. */
export type StackConfig = { routes: unknown[], [key: string]: unknown }

export const test = base
  // eslint-disable-next-line no-empty-pattern -- vitest reads a fixture's dependencies from its first argument's pattern
  .extend('gatewayAddress', { scope: 'worker' }, async ({}) => await reserveBaseUrl())
  .extend('op', { scope: 'worker' }, async ({ gatewayAddress }, { onCleanup }) => {
    const op = await startOidcProvider([gatewayClient(gatewayAddress.baseUrl, 'demo', 'c')])
    onCleanup(async () => { await op.close() })
    return op
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
    let running: TestGateway | undefined
    onCleanup(async () => { await running?.close() })
    return async (raw: StackConfig, options: StartOptions = {}): Promise<TestGateway> => {
      if (running) throw new Error('startStack: this file\'s gateway is running on the worker\'s address already; close it first, or start another one with startGatewayWithProvider')
      const gateway = await startGateway({
        store: { type: 'redis', url: redis.url },
        ...raw,
        server: { ...(raw.server as object | undefined), ...gatewayAddress },
        providers: { demo: oidcClient(op.issuer, 'c', 's'), ...(raw.providers as object | undefined) },
      }, options)
      running = gateway
      return {
        ...gateway,
        close: async () => {
          running = undefined
          await gateway.close()
        },
      }
    }
  })
