// What oidc-provider tells of itself reaches the gateway's log and metrics (src/agents/provider-events.ts):
// an error thrown past its own handler is Koa's app 'error' event, which Koa printed to stderr,
// outside the log, when nobody listened. A real Provider (its dev defaults: no socket, no store).
import type { EventEmitter } from 'node:events'
import Provider from 'oidc-provider'
import { describe, expect, it, vi } from 'vitest'
import { told } from '../../src/agents/provider-events.js'
import type { Logger } from '../../src/ops/logger.js'

function provider (): Provider {
  // Its development defaults warn on the console: not this test's subject.
  const warn = vi.spyOn(console, 'warn').mockImplementation(() => {})
  try {
    return new Provider('http://127.0.0.1:9')
  } finally {
    warn.mockRestore()
  }
}

describe('what oidc-provider tells', () => {
  it('logs an error thrown past its own handler (Koa\'s app event) and its server_error, with their causes', () => {
    const errors: Array<{ fields: unknown, message: string }> = []
    const log = { error: (fields: unknown, message: string) => { errors.push({ fields, message }) } } as unknown as Logger
    const counted: string[] = []
    const server = provider()
    told(server, (event, result) => { counted.push(`${event} ${result}`) }, log)
    const app: EventEmitter = server
    const thrown = new TypeError('persist can only be called on previously persisted Sessions')
    app.emit('error', thrown, {})
    server.emit('server_error', {}, new Error('adapter failed'))
    server.emit('grant.error', {}, Object.assign(new Error('x'), { error: 'invalid_grant' }))
    expect(errors).toEqual([
      { fields: { err: thrown }, message: 'agents: authorization server error' },
      { fields: { err: expect.objectContaining({ message: 'adapter failed' }) }, message: 'agents: authorization server error' },
    ])
    // Koa adds its own listener, which prints to stderr, only where none is.
    expect(app.listenerCount('error')).toBe(1)
    expect(counted).toEqual(['token invalid_grant'])
  })
})
