// A proxied websocket, upstream first (reliability round 3): the upstream's leg is opened before the
// client's upgrade is answered, so an upstream that is down fails the upgrade as HTTP would (502,
// 504 past the route's timeout) instead of a 101 followed by a close. Once both legs are open they
// are linked: messages, pings and pongs pass both ways through the hooks of websocket.ts, and a leg
// that ends closes the other with a code a client can act on. A code the peer sent passes on with
// its reason; a leg that vanished without a close frame (ws reports 1006, which may not be sent, and
// which @fastify/http-proxy passed on as the non-standard 4006) or that failed closes the other with
// 1014 "bad gateway" toward the client and 1001 "going away" toward the upstream.
// @see https://www.rfc-editor.org/rfc/rfc6455#section-7.4.1 and the IANA registry of close codes (1014)
import type { ClientRequest, IncomingMessage } from 'node:http'
import { WebSocket } from 'ws'
import { closeLeg, type WebSocketHooks } from './websocket.js'

/** The close code and reason the client gets when the upstream's leg vanished or failed. */
export const UPSTREAM_GONE_CODE = 1014
export const UPSTREAM_GONE_REASON = 'bad gateway'
/** The close code and reason the upstream gets when the client's leg vanished or failed. */
export const CLIENT_GONE_CODE = 1001
export const CLIENT_GONE_REASON = 'going away'

/** How the upstream's handshake failed: `code` names it for the log (upstream-response.ts). */
export class UpstreamHandshakeError extends Error {
  constructor (message: string, readonly code: string, readonly status?: number) {
    super(message)
  }
}

/** Where and how to open the upstream's leg. */
export interface UpstreamLeg {
  readonly url: URL
  /** The sub-protocols the client offered, offered to the upstream in its order. */
  readonly protocols: string[]
  readonly headers: Record<string, string>
  /** The largest message either way (websocketMaxMessage). */
  readonly maxPayload: number
  /** The route's timeout: the whole handshake, connecting included. */
  readonly timeoutMs: number
  /** The leg was just created (before it connects): what a registry ties to it (leg-admissions.ts). */
  readonly created?: (leg: WebSocket) => void
  /** Settles when the client's socket closes first: the upstream's handshake is then given up. */
  readonly clientGone: Promise<void>
  /** Settles when the gateway begins to close: the upstream's handshake is then given up. */
  readonly shutdown: Promise<void>
}

/**
 * Opens the upstream's leg: resolves once the upstream answered its upgrade 101, rejects with an
 * UpstreamHandshakeError (or the socket's error, such as ECONNREFUSED) otherwise; the leg is then
 * destroyed. The open leg is paused: link() resumes it.
 */
export function openUpstream (leg: UpstreamLeg): Promise<WebSocket> {
  const upstream = new WebSocket(leg.url, leg.protocols, { headers: leg.headers, maxPayload: leg.maxPayload })
  leg.created?.(upstream)
  return new Promise((resolve, reject) => {
    let settled = false
    const settle = (error: Error | undefined) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      if (error === undefined) return resolve(upstream)
      // Whatever ws reports after this (its own abort) is already answered.
      upstream.on('error', () => {})
      upstream.terminate()
      reject(error)
    }
    const timer = setTimeout(() => settle(new UpstreamHandshakeError('the upstream did not answer the websocket upgrade in time', 'WS_HANDSHAKE_TIMEOUT')), leg.timeoutMs)
    // Paused until linked: a message the upstream sends right after its 101 waits in the socket
    // instead of being read before anything listens for it.
    upstream.once('open', () => {
      upstream.pause()
      settle(undefined)
    })
    upstream.once('error', (error) => settle(error))
    upstream.once('unexpected-response', (request: ClientRequest, response: IncomingMessage) => {
      response.destroy()
      request.destroy()
      settle(new UpstreamHandshakeError(`the upstream answered the websocket upgrade with ${response.statusCode ?? 0}`, 'WS_UNEXPECTED_RESPONSE', response.statusCode))
    })
    void leg.clientGone.then(() => settle(new UpstreamHandshakeError('the client left before the upstream answered', 'WS_CLIENT_GONE')))
    void leg.shutdown.then(() => settle(new UpstreamHandshakeError('the gateway began to shut down before the upstream answered', 'WS_SHUTDOWN')))
  })
}

/** Whether `code`, as a close event reports it, may be sent on in a close frame. */
function sendable (code: number): boolean {
  return (code >= 1000 && code <= 1014 && code !== 1004 && code !== 1005 && code !== 1006) || (code >= 3000 && code <= 4999)
}

/** Closes `leg` (if still open) as `from`'s close says, or with `gone` when `from` vanished. */
function closeAfter (leg: WebSocket, code: number, reason: Buffer, gone: readonly [number, string]): void {
  if (leg.readyState !== WebSocket.OPEN) return
  if (code === 1005) closeLeg(leg)
  else if (sendable(code)) closeLeg(leg, code, reason)
  else closeLeg(leg, gone[0], gone[1])
}

/** Links the client's leg and the upstream's, both open: everything passes both ways until one ends. */
export function link (client: WebSocket, upstream: WebSocket, hooks: WebSocketHooks): void {
  const toClient = [UPSTREAM_GONE_CODE, UPSTREAM_GONE_REASON] as const
  const toUpstream = [CLIENT_GONE_CODE, CLIENT_GONE_REASON] as const
  client.on('message', (data: Buffer, binary) => {
    hooks.onIncomingMessage(undefined, client, upstream, { data })
    upstream.send(data, { binary })
  })
  upstream.on('message', (data: Buffer, binary) => {
    hooks.onOutgoingMessage(undefined, client, upstream, { data })
    client.send(data, { binary })
  })
  // Pings and pongs wait behind the messages on the same leg: held back as messages are, so that a
  // peer sending unsolicited pongs to one that does not read cannot fill the gateway with them.
  for (const kind of ['ping', 'pong'] as const) {
    client.on(kind, (data: Buffer) => {
      if (upstream.readyState !== WebSocket.OPEN) return
      hooks.onIncomingMessage(undefined, client, upstream, { data })
      upstream[kind](data)
    })
    upstream.on(kind, (data: Buffer) => {
      if (client.readyState !== WebSocket.OPEN) return
      hooks.onOutgoingMessage(undefined, client, upstream, { data })
      client[kind](data)
    })
  }
  client.on('close', (code, reason) => closeAfter(upstream, code, reason, toUpstream))
  upstream.on('close', (code, reason) => closeAfter(client, code, reason, toClient))
  // The error's text stays in the gateway: the other end learns only that this leg failed.
  client.on('error', () => closeAfter(upstream, 1006, Buffer.alloc(0), toUpstream))
  upstream.on('error', () => closeAfter(client, 1006, Buffer.alloc(0), toClient))
  upstream.resume()
  hooks.onConnect(undefined, client, upstream)
}
