// forward-auth judges the canonical path only where the raw path the application receives has the
// same segments: a table of raw paths, and a fast-check property that wherever resolvesSegments
// says nothing moves, canonicalTarget's path has exactly the raw path's segments, each with the
// same decoded text.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { canonicalTarget } from '../../src/config/canonical.js'
import { resolvesSegments } from '../../src/config/raw-segments.js'

describe('resolvesSegments', () => {
  it.each([
    '/admin/users/../../pub', '/admin/..', '/admin/x/%2e%2e/%2e%2e/', '/admin/./x', '//admin', '/pub/%2E%2e/admin',
    '/a/.%2E', '/a/%2e', '/a//b', '/a/b//', '/./a', '/a/..?x=1', '/a/.?/b',
  ])('%s: its segments move', (uri) => {
    expect(resolvesSegments(uri)).toBe(true)
  })

  it.each(['/', '/a', '/a/', '/a/b.c', '/a/...', '/a/.b', '/a/b.', '/%61dmin', '/a%7Bb', '/a?x=/../..', '/a?x=//', '/a/%2e%2f'])('%s: its segments stay', (uri) => {
    expect(resolvesSegments(uri)).toBe(false)
  })

  it('where it says the segments stay, the canonical path has the raw path\'s segments, each decoding the same', () => {
    const piece = fc.constantFrom('a', 'B', '.', '..', '%2e', '%2E', '%61', '%7e', '~', '{', '%7B', '%c3%a9', '-', '/')
    const path = fc.array(piece, { maxLength: 12 }).map((pieces) => `/${pieces.join('')}`)
    fc.assert(fc.property(path, (raw) => {
      const canonical = canonicalTarget(raw)
      if (resolvesSegments(raw) || !canonical.ok) return
      const decoded = (text: string): string[] => text.split('/').map((segment) => decodeURIComponent(segment))
      expect(decoded(canonical.url)).toEqual(decoded(raw))
    }), { numRuns: 2000 })
  })
})
