// Where the gateway's upstream pool meets @fastify/reply-from, and the
// only place their types are bridged. reply-from takes as its undici dispatcher any object with a
// `request` method and calls only the callback form of it; over undici it hands onResponse
// `{ statusCode, headers, stream }` with the dispatcher's body as `stream`, while its types describe
// the node:http response. test/proxy/reply-from-adapter.test.ts runs a real reply-from over a real
// pool and checks both, so an upgrade that changes either fails there.
import type { FastifyReplyFromHooks, FastifyReplyFromOptions } from '@fastify/reply-from'
import type { IncomingHttpHeaders } from 'node:http'
import type { Dispatcher } from 'undici'
import { StreamedBody, WholeBody } from './upstream-body.js'
import { UpstreamFailure, type UpstreamPool } from './upstream-pool.js'

/** The dispatcher form of @fastify/reply-from's `undici` option. */
type ReplyFromDispatcher = Extract<NonNullable<FastifyReplyFromOptions['undici']>, { request: Dispatcher['request'] }>

type OnResponse = NonNullable<FastifyReplyFromHooks['onResponse']>

/** What reply-from hands to onResponse as its third argument, as its types spell it. */
export type ReplyFromResponse = Parameters<OnResponse>[2]

/** What reply-from hands to onResponse over an {@link UpstreamPool}. */
export interface UpstreamResponse {
  headers: IncomingHttpHeaders
  /** The body, streamed or read whole (the pool decides: upstream-body.ts), or why there is none (the route's pool answers failures this way). */
  stream: StreamedBody | WholeBody | UpstreamFailure
}

/** `pool` as @fastify/reply-from's `undici` option: reply-from will send the route's requests through it. */
export function replyFromDispatcher (pool: UpstreamPool): ReplyFromDispatcher {
  // The cast: Dispatcher['request'] is overloaded (a promise form and a callback form); UpstreamPool
  // has only the callback form, the one reply-from calls (`pool.request(req, callback)`).
  return pool as unknown as ReplyFromDispatcher
}

/**
 * reply-from's onResponse argument as what it is over the pool: headers and the pool's body (a
 * stream, or read whole) or an {@link UpstreamFailure}. Anything else is a TypeError: reply-from
 * changed what it hands over, and nothing downstream could read it.
 */
export function upstreamResponse (response: ReplyFromResponse): UpstreamResponse {
  // The cast: reply-from's types say node:http IncomingMessage with a `stream`; over undici the
  // object is its own `{ statusCode, headers, stream }`. What it really holds is checked below.
  const { headers, stream } = response as unknown as { headers?: unknown, stream?: unknown }
  if (typeof headers !== 'object' || headers === null || Array.isArray(headers)) {
    throw new TypeError('reply-from handed onResponse a response without a headers object')
  }
  if (!(stream instanceof UpstreamFailure) && !(stream instanceof StreamedBody) && !(stream instanceof WholeBody)) {
    throw new TypeError('reply-from handed onResponse a response whose stream is not the pool\'s body or UpstreamFailure')
  }
  return { headers: headers as IncomingHttpHeaders, stream }
}
