// Log redaction by path: OAuth's code and state are masked where they appear (a callback's query or
// form body), and a field that merely shares the name (a worker's exit code) stays readable.
import pino from 'pino'
import { describe, expect, it } from 'vitest'
import { loggerOptions } from '../../src/ops/logger.js'
import { logCollector } from '../helpers/gateway.js'

function logged (fields: Record<string, unknown>): Record<string, unknown> {
  const { stream, lines } = logCollector()
  pino(loggerOptions('info'), stream).info(fields, 'line')
  return JSON.parse(lines[0]!) as Record<string, unknown>
}

describe('log redaction', () => {
  it('keeps an exit code and a signal as they are', () => {
    expect(logged({ workerPid: 42, exitCode: 1, signal: null, code: 137 })).toMatchObject({ workerPid: 42, exitCode: 1, signal: null, code: 137 })
  })

  it('masks OAuth code and state in a query or form body, and tokens anywhere at the top level', () => {
    const line = logged({ query: { code: 'c0de', state: 'st4te', iss: 'https://op' }, body: { code: 'c0de' }, access_token: 't0ken' })
    expect(line).toMatchObject({ query: { code: '[redacted]', state: '[redacted]', iss: 'https://op' }, body: { code: '[redacted]' }, access_token: '[redacted]' })
    expect(JSON.stringify(line)).not.toMatch(/c0de|st4te|t0ken/)
  })
})
