// A client's websocket handshake is judged before the upstream's leg opens (proxy/websocket-handshake.ts),
// and that judgement must be ws's own: a handshake it lets through that ws then refuses would reach
// the upstream for nothing, one it refuses that ws accepts would be a websocket the gateway breaks.
// A hostile table, and a property against ws's WebSocketServer.handleUpgrade on the same values.
import type { IncomingMessage } from 'node:http'
import { Duplex } from 'node:stream'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { WebSocketServer } from 'ws'
import { handshakeProblem, type Handshake } from '../../src/proxy/websocket-handshake.js'

const KEY = 'dGhlIHNhbXBsZSBub25jZQ=='
const valid = { upgrade: 'websocket', 'sec-websocket-key': KEY, 'sec-websocket-version': '13' }
const server = new WebSocketServer({ noServer: true })

/** Whether ws's own server completes this handshake (its callback runs), on a socket that writes nowhere. */
function wsAccepts ({ method, headers }: Handshake): boolean {
  const socket = Object.assign(new Duplex({ read () {}, write (_chunk, _encoding, done) { done() } }), { setTimeout () {}, setNoDelay () {} })
  let accepted = false
  server.handleUpgrade({ method, headers, socket } as unknown as IncomingMessage, socket, Buffer.alloc(0), (websocket) => {
    accepted = true
    websocket.terminate()
  })
  socket.destroy()
  return accepted
}

describe('a websocket handshake, judged before the upstream is reached', () => {
  it.each<[string, Handshake, boolean]>([
    ['a valid one', { method: 'GET', headers: valid }, true],
    ['version 8', { method: 'GET', headers: { ...valid, 'sec-websocket-version': '8' } }, true],
    ['"Upgrade: WebSocket"', { method: 'GET', headers: { ...valid, upgrade: 'WebSocket' } }, true],
    ['a sub-protocol list with blanks', { method: 'GET', headers: { ...valid, 'sec-websocket-protocol': 'chat,\tsuperchat , v2' } }, true],
    ['POST', { method: 'POST', headers: valid }, false],
    ['no key', { method: 'GET', headers: { ...valid, 'sec-websocket-key': undefined } }, false],
    ['a key of 15 bytes', { method: 'GET', headers: { ...valid, 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ=' } }, false],
    ['a key sent twice', { method: 'GET', headers: { ...valid, 'sec-websocket-key': `${KEY}, ${KEY}` } }, false],
    ['a key in base64url', { method: 'GET', headers: { ...valid, 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZ_-=' } }, false],
    ['no version', { method: 'GET', headers: { ...valid, 'sec-websocket-version': undefined } }, false],
    ['version 7', { method: 'GET', headers: { ...valid, 'sec-websocket-version': '7' } }, false],
    ['version sent twice', { method: 'GET', headers: { ...valid, 'sec-websocket-version': '13, 13' } }, false],
    ['an empty sub-protocol', { method: 'GET', headers: { ...valid, 'sec-websocket-protocol': 'chat,,v2' } }, false],
    ['a sub-protocol twice', { method: 'GET', headers: { ...valid, 'sec-websocket-protocol': 'chat, chat' } }, false],
    ['a sub-protocol with a space inside', { method: 'GET', headers: { ...valid, 'sec-websocket-protocol': 'my chat' } }, false],
    ['a sub-protocol that is no token', { method: 'GET', headers: { ...valid, 'sec-websocket-protocol': 'chat/"v2"' } }, false],
    ['an empty sub-protocol header', { method: 'GET', headers: { ...valid, 'sec-websocket-protocol': '' } }, false],
  ])('%s', (_, handshake, accepted) => {
    expect(handshakeProblem(handshake) === undefined).toBe(accepted)
    expect(wsAccepts(handshake)).toBe(accepted)
  })

  it('lets through exactly what ws accepts', () => {
    const token = fc.stringMatching(/^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,6}$/)
    const fragment = fc.oneof(token, fc.constantFrom('', ' ', '\t', 'a b', 'x"y', 'chat', ' chat', 'chat '), fc.string({ maxLength: 4 }))
    const protocols = fc.oneof(
      fc.constant(undefined),
      fc.tuple(fc.array(fragment, { minLength: 1, maxLength: 4 }), fc.constantFrom(',', ', ', ' ,', ',\t')).map(([parts, comma]) => parts.join(comma)),
      fc.string({ maxLength: 12 })
    )
    // Each field is mostly valid, so that most handshakes reach the checks after it (ws's order).
    const mostly = <T>(good: T, bad: fc.Arbitrary<T>) => fc.oneof({ weight: 4, arbitrary: fc.constant(good) }, { weight: 1, arbitrary: bad })
    const key = mostly<string | undefined>(KEY, fc.oneof(fc.uint8Array({ minLength: 14, maxLength: 18 }).map((bytes) => Buffer.from(bytes).toString('base64')), fc.string({ maxLength: 26 }), fc.constant(undefined)))
    const version = mostly<string | undefined>('13', fc.oneof(fc.constantFrom(undefined, '8', '7', ' 13', '13.0', '0xd', '1.3e1', '13, 13', '', '+13'), fc.string({ maxLength: 4 })))
    const handshake = fc.record({
      method: mostly('GET', fc.constantFrom('POST', 'get', 'HEAD')),
      headers: fc.record({
        upgrade: mostly<string | undefined>('websocket', fc.constantFrom(undefined, 'WebSocket', 'websocket2', 'h2c')),
        'sec-websocket-key': key,
        'sec-websocket-version': version,
        'sec-websocket-protocol': protocols,
      }),
    })
    fc.assert(fc.property(handshake, (shake) => {
      expect(handshakeProblem(shake) === undefined).toBe(wsAccepts(shake))
    }), { numRuns: 2000 })
  })
})
