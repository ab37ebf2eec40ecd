// What a person reads on an error page: each sentence once (the heading is the title; the
// explanation and the message are not repeated), a stale sign-in in plain words with a "Start again"
// that goes back toward where it was going only when the gateway's own state said where, the code
// kept small for support, and every value escaped.
import fc from 'fast-check'
import type { FastifyInstance } from 'fastify'
import { describe, expect, it } from 'vitest'
import { parseConfig } from '../../src/config/config.js'
import { ERRORS, GatewayError, MESSAGES, type ErrorCode } from '../../src/errors.js'
import { buildGateway } from '../../src/gateway.js'
import { errorPage } from '../../src/http/pages.js'
import { logCollector } from '../helpers/gateway.js'

const CODES = Object.keys(ERRORS) as ErrorCode[]

/** The text of the page's body as a person reads it: tags dropped, the escaper's entities decoded. */
function visibleText (html: string): string {
  const body = html.slice(html.indexOf('<body>'), html.indexOf('</body>'))
  return body.replace(/<[^>]*>/g, ' ').replace(/&#(\d+);/g, (_m, code: string) => String.fromCharCode(Number(code))).replace(/&middot;/g, '·')
}

function occurrences (text: string, part: string): number {
  return text.split(part).length - 1
}

describe('error pages say each sentence once', () => {
  it.each(CODES)('%s: a message that is the explanation itself appears once', (code) => {
    const text = visibleText(errorPage(new GatewayError(code, ERRORS[code].explanation), '/oauth/'))
    expect(occurrences(text, ERRORS[code].explanation)).toBe(1)
    expect(occurrences(text, ERRORS[code].title)).toBe(1)
  })

  it('any code, any sentence (hostile characters included): the message appears exactly once, escaped', () => {
    const word = fc.stringMatching(/^[a-z<>&"']{1,10}$/)
    const sentence = fc.tuple(fc.stringMatching(/^[A-Z][a-z]{2,10}$/), fc.array(word, { minLength: 1, maxLength: 6 }))
      .map(([first, rest]) => `${first} ${rest.join(' ')}.`)
    fc.assert(fc.property(fc.constantFrom(...CODES), sentence, (code, message) => {
      const html = errorPage(new GatewayError(code, message), '/oauth/')
      expect(occurrences(visibleText(html), message)).toBe(1)
      if (/[<>&"']/.test(message)) expect(html).not.toContain(message)
    }), { numRuns: 300 })
  })

  it('the 404 page a browser gets says "Nothing is served at this address." once', async () => {
    const logs = logCollector()
    const app: FastifyInstance = await buildGateway(parseConfig('', {}), { logStream: logs.stream })
    try {
      const response = await app.inject({ url: '/no/such/page', headers: { accept: 'text/html' } })
      expect(response.statusCode).toBe(404)
      const text = visibleText(response.body)
      expect(occurrences(text, 'Nothing is served at this address.')).toBe(1)
      expect(text).toContain('not_found')
    } finally {
      await app.close()
    }
  })
})

describe('a stale sign-in link', () => {
  const login = 'https://gw.example/oauth/login/demo/?next=%2Fapp%2Freports'
  it.each([
    ['the state named where it was going', { loginUrl: login, flowNext: '/app/reports' }, login],
    ['the state could not be read as the gateway\'s own', { loginUrl: 'https://gw.example/oauth/login/demo/?next=%2Foauth%2F' }, '/oauth/'],
    ['no sign-in address at all (a sign-out\'s state)', {}, '/oauth/'],
  ])('%s: "Start again" goes to %s', (_what, details, href) => {
    const html = errorPage(new GatewayError('invalid_state', MESSAGES.staleSignIn, { details }), '/somewhere')
    const text = visibleText(html)
    expect(occurrences(text, 'This sign-in link has expired or was already used; start again.')).toBe(1)
    expect(html).toContain(`<a class="button" href="${href.replaceAll('&', '&#38;')}">Start again</a>`)
    expect(text).toMatch(/For support: error code\s+invalid_state/)
  })
})

describe('no protocol words where a person reads', () => {
  it.each(CODES)('%s: the title and explanation name no PKCE, nonce, JWS, JWT, JWKS, state or ID token', (code) => {
    const { title, explanation } = ERRORS[code]
    expect(`${title} ${explanation}`).not.toMatch(/PKCE|nonce|JWS|JWT|JWKS|\bstate\b|ID token|introspection/i)
  })

  it('a provider-side failure shows the plain explanation, its technical message only small, for support', () => {
    const html = errorPage(new GatewayError('token_exchange_failed', 'The ID token is invalid.'), '/oauth/')
    expect(html).toContain(`<p>${ERRORS.token_exchange_failed.explanation}</p>`)
    expect(html).toContain('<p class="code">For support: error code <code>token_exchange_failed</code> (The ID token is invalid.)</p>')
  })
})
