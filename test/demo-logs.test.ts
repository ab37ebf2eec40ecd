// The demo's terminal view of the gateway's log: one readable line per request on a TTY, the JSON
// lines unchanged when piped.
import { PassThrough } from 'node:stream'
import { prettyFactory } from 'pino-pretty'
import { describe, expect, it } from 'vitest'
import { DEMO_PRETTY_OPTIONS, showGatewayLogs } from '../demo/log-view.js'

const request = { level: 30, time: Date.UTC(2026, 10, 23, 14, 58, 32), pid: 7, hostname: 'h', reqId: 'req-1', method: 'GET', url: '/app/', statusCode: 302, responseTime: 4, msg: 'request completed' }
const outage = { level: 40, time: Date.UTC(2026, 10, 23, 14, 58, 33), pid: 7, hostname: 'h', node: '127.0.0.1:6379', msg: 'session store unreachable' }

describe('the demo log view', () => {
  const pretty = prettyFactory({ ...DEMO_PRETTY_OPTIONS, colorize: false })

  it('shows a request as one line: time, level, method, address, status, duration', () => {
    expect(pretty(JSON.stringify(request))).toMatch(/^\[\d\d:\d\d:\d\d\] INFO: GET \/app\/ 302 4 ms\n$/)
  })

  it('shows a refusal on one line, its error code beside its message', () => {
    const refused = { level: 30, time: request.time, pid: 7, hostname: 'h', reqId: 'req-1', error: 'unauthenticated', message: 'Sign in first.', msg: 'request rejected' }
    expect(pretty(JSON.stringify(refused))).toMatch(/^\[\d\d:\d\d:\d\d\] INFO: request rejected \{"error":"unauthenticated","message":"Sign in first\."\}\n$/)
  })

  it('shows any other line with its message and fields, on one line', () => {
    expect(pretty(JSON.stringify(outage))).toMatch(/^\[\d\d:\d\d:\d\d\] WARN: session store unreachable \{"node":"127\.0\.0\.1:6379"\}\n$/)
  })

  it('passes the JSON lines through unchanged when the output is not a terminal', async () => {
    const lines = new PassThrough()
    const out = new PassThrough()
    let written = ''
    out.on('data', (chunk: Buffer) => { written += chunk.toString() })
    showGatewayLogs(lines, out)
    lines.end(`${JSON.stringify(request)}\n`)
    await new Promise((resolve) => out.once('end', resolve))
    expect(written).toBe(`${JSON.stringify(request)}\n`)
  })

  it('pretty-prints when the output is a terminal', async () => {
    const lines = new PassThrough()
    const out = Object.assign(new PassThrough(), { isTTY: true })
    let written = ''
    out.on('data', (chunk: Buffer) => { written += chunk.toString() })
    showGatewayLogs(lines, out)
    lines.write(`${JSON.stringify(request)}\n`)
    await expect.poll(() => written).toContain('GET /app/ 302 4 ms')
    expect(written).not.toContain('"reqId"')
    lines.end()
  })
})
