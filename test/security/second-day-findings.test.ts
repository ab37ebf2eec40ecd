/* eslint-disable no-template-curly-in-string -- the configs and shell values under test contain ${VAR} text */
// Findings of the second-day attack (config messages and YAML handling): each test here failed on
// the code it was written against (an alias bomb expanded, a self-holding alias overflowed the
// stack, a secret of the wrong type or a URL's query quoted in a problem) and holds since.
import { describe, expect, it } from 'vitest'
import { ConfigError, parseConfig } from '../../src/config/config.js'
import { tracingSettings } from '../../src/ops/tracing-settings.js'

const SESSION = 'session:\n  secret: test-session-secret-0123456789-abcdefghij\n'

/** `levels` anchors, each a list of ten aliases of the one before: 10^levels scalars once expanded, from a few hundred bytes. */
function aliasBomb (levels: number): string {
  let text = `${SESSION}routes: []\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n`
  for (let i = 1; i < levels; i++) text += `a${i}: &a${i} [${Array.from({ length: 10 }, () => `*a${i - 1}`).join(', ')}]\n`
  return text
}

/** The message parseConfig throws for `text`, or '' when it accepts it. */
function messageOf (text: string, env: Record<string, string> = {}): string {
  try {
    parseConfig(text, env, 'test.yaml')
    return ''
  } catch (error) {
    return error instanceof Error ? `${error.name}: ${error.message}` : String(error)
  }
}

describe('YAML aliases', () => {
  // config.ts's walk resolves every alias itself, so yaml's own maxAliasCount (100) never applies:
  // 7 levels (a 1 KB file) ran --check past 60 s and 3.5 GB before it was killed.
  it('refuses an alias bomb as the yaml library does, instead of expanding it', () => {
    expect(aliasBomb(5).length).toBeLessThan(1024)
    expect(messageOf(aliasBomb(5))).toMatch(/^ConfigError: .*alias/s)
  })

  it.each([
    ['a list that holds itself', `${SESSION}routes: &r [ *r ]\n`],
    ['a mapping that holds itself', `${SESSION}routes: []\nx: &x { a: *x }\n`],
  ])('reports %s as a problem of the file, not a stack overflow', (_name, text) => {
    const message = messageOf(text)
    expect(message).toMatch(/^ConfigError: test\.yaml: /)
    expect(message).not.toMatch(/call stack/i)
  })

  it('an alias that names no anchor (a secret that starts with *) is said as what it is, with its line, the value not echoed', () => {
    // It read "its aliases expand to too many values", without a line (an outside tester's finding).
    const message = messageOf(`${SESSION}providers:\n  corp:\n    clientSecret: *Sup3rSecretValue\nroutes: []\n`)
    expect(message).toMatch(/a value that starts with \* is read as a YAML alias, and no anchor \(&name\) before it has its name: quote the value if the \* is part of it \(line \d+\)/)
    expect(message).not.toContain('Sup3rSecretValue')
  })
})

describe('a secret in a config message', () => {
  // schema-check.ts's "must be <this>, got <the value>" prints any value of the wrong type, a secret's too.
  it.each([
    ['previousSecrets written as one value (not a list)', 'session:\n  secret: test-session-secret-0123456789-abcdefghij\n  previousSecrets: old-session-secret-0123456789-PREVIOUS\n', {}, 'PREVIOUS'],
    ['previousSecrets as the documented variable, not in a list', 'session:\n  secret: test-session-secret-0123456789-abcdefghij\n  previousSecrets: ${GATEWAY_PREVIOUS_SECRET}\n', { GATEWAY_PREVIOUS_SECRET: 'old-session-secret-0123456789-FROMENV' }, 'FROMENV'],
    ['a secret variable in a number key', 'server:\n  port: ${DB_PASSWORD}\n', { DB_PASSWORD: 'DbPassSecret42' }, 'DbPassSecret42'],
    ['a token variable in a duration', 'session:\n  secret: test-session-secret-0123456789-abcdefghij\n  ttl: ${API_TOKEN}\n', { API_TOKEN: 'ApiTokenSecret42' }, 'ApiTokenSecret42'],
  ])('%s: the message names the variable, never its value', (_name, text, env, secret) => {
    const message = messageOf(`${text}${text.includes('session:') ? '' : SESSION}routes: []\n`, env)
    expect(message).toMatch(/^ConfigError/)
    expect(message).not.toContain(secret)
  })

  it('an upstream URL refused for its query does not print the query (the password is masked, the token is not)', () => {
    const message = messageOf(`${SESSION}routes: [{ path: /a/, upstream: "http://u:UpstreamPass42@127.0.0.1:9/?access_token=UpstreamQuerySecret42", auth: none }]\n`)
    expect(message).toMatch(/routes\[0\]\.upstream/)
    expect(message).not.toContain('UpstreamPass42')
    expect(message).not.toContain('UpstreamQuerySecret42')
  })

  it('tracing.otlp refused for its query does not print the query', () => {
    const message = messageOf(`${SESSION}routes: []\ntracing:\n  otlp: "https://collector.example/?api_key=OtlpYamlSecret42"\n`)
    expect(message).toMatch(/tracing\.otlp: must have no query/)
    expect(message).not.toContain('OtlpYamlSecret42')
  })

  it('an OTLP endpoint refused for its query does not print the query', () => {
    expect(() => tracingSettings({ otlp: undefined, serviceName: 's', sampleRatio: 1 }, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://c/v1/traces?api_key=OtlpKeySecret42' }))
      .toThrow(/^(?![\s\S]*OtlpKeySecret42)/)
  })
})

it('ConfigError is what a bad file throws (the tests above rely on it)', () => {
  expect(messageOf('routes: 7\n')).toMatch(/^ConfigError: /)
  expect(new ConfigError('f', []).name).toBe('ConfigError')
})
