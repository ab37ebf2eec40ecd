// The pieces the proxied request's hot path is made of, tested on their own: reading the session
// cookie straight from the Cookie header, and the batched log destination in front of sonic-boom.
import { mkdtemp, readFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pino from 'pino'
import { describe, expect, it } from 'vitest'
import { BatchedDestination } from '../src/log-destination.js'
import { cookieValue } from '../src/session.js'

describe('cookieValue', () => {
  it('finds the named cookie wherever it is in the header', () => {
    expect(cookieValue('gw_session=abc', 'gw_session')).toBe('abc')
    expect(cookieValue('theme=dark; gw_session=abc; lang=en', 'gw_session')).toBe('abc')
    expect(cookieValue('theme=dark;gw_session=abc', 'gw_session')).toBe('abc')
    expect(cookieValue('  gw_session = abc ; x=1', 'gw_session')).toBe('abc')
  })

  it('takes the first of two cookies with the name, as a browser sends the most specific path first', () => {
    expect(cookieValue('gw_session=first; gw_session=second', 'gw_session')).toBe('first')
  })

  it('does not mistake a cookie whose name merely contains the name', () => {
    expect(cookieValue('xgw_session=evil; gw_session_flow=flow', 'gw_session')).toBeUndefined()
    expect(cookieValue('gw_session_flow=flow; gw_session=abc', 'gw_session')).toBe('abc')
    expect(cookieValue('other=gw_session=abc', 'gw_session')).toBeUndefined()
  })

  it('answers undefined for no header, no such cookie, or a name without a value', () => {
    expect(cookieValue(undefined, 'gw_session')).toBeUndefined()
    expect(cookieValue('', 'gw_session')).toBeUndefined()
    expect(cookieValue('gw_session', 'gw_session')).toBeUndefined()
    expect(cookieValue('a=1; b=2', 'gw_session')).toBeUndefined()
  })
})

describe('BatchedDestination', () => {
  it('hands the lines of one event-loop turn to its target in one write, in order', async () => {
    const writes: string[] = []
    const destination = new BatchedDestination({ write: (chunk) => writes.push(chunk), flushSync: () => {} })
    destination.write('one\n')
    destination.write('two\n')
    destination.write('three\n')
    expect(writes).toEqual([])
    await new Promise((resolve) => setImmediate(resolve))
    expect(writes).toEqual(['one\ntwo\nthree\n'])
    destination.write('four\n')
    await new Promise((resolve) => setImmediate(resolve))
    expect(writes).toEqual(['one\ntwo\nthree\n', 'four\n'])
  })

  it('loses nothing on flushSync: every line reaches the file through a real pino destination', async () => {
    const file = join(await mkdtemp(join(tmpdir(), 'gw-log-')), 'out.log')
    const target = pino.destination({ dest: file, sync: false })
    await new Promise((resolve) => target.once('ready', resolve))
    const destination = new BatchedDestination(target)
    const log = pino({ base: undefined, timestamp: false }, destination)
    for (let i = 0; i < 1000; i++) log.info({ i }, 'line')
    await new Promise((resolve) => setImmediate(resolve))
    for (let i = 1000; i < 1500; i++) log.info({ i }, 'line')
    destination.flushSync()
    const lines = (await readFile(file, 'utf8')).trim().split('\n').map((line) => (JSON.parse(line) as { i: number }).i)
    expect(lines).toEqual([...Array(1500).keys()])
  })
})
