// The two legs of a proxied websocket (client and upstream), as the link's hooks see them
// (websocket-link.ts): a message over websocketMaxMessage closes both with 1009, and backpressure bounds the bytes
// waiting on each leg. The proxy sends every message it reads without looking at what is still
// unsent, so a peer that never reads would otherwise make the
// gateway keep everything the other side sends.
// @see https://www.rfc-editor.org/rfc/rfc6455#section-5.5.3 (an unsolicited Pong needs no answer)
import type { WebSocket } from 'ws'

/** WebSocket.CONNECTING, OPEN and CLOSED, as plain numbers. */
const CONNECTING = 0
const OPEN = 1
const CLOSED = 3

/**
 * How long a leg the gateway closes has to answer its close frame before its socket is cut: as long
 * as the shutdown gives a stalled connection (http/drain.ts). ws's own bound is 30 s, past the
 * default `server.shutdownTimeout` (10 s): a peer that never answered held the shutdown until the
 * process exited with status 1 (an outside tester's finding).
 */
export const CLOSE_GRACE_MS = 1000

/**
 * Closes `leg` with `code` and `reason` (none: a close frame without a code), and cuts its socket
 * if the peer has not answered within {@link CLOSE_GRACE_MS}. A paused leg (backpressure) is
 * resumed first: it could not read the answer otherwise.
 */
export function closeLeg (leg: WebSocket, code?: number, reason?: string | Buffer): void {
  if (leg.readyState === CLOSED) return
  leg.resume()
  if (code === undefined) leg.close()
  else leg.close(code, reason)
  const timer = setTimeout(() => { leg.terminate() }, CLOSE_GRACE_MS)
  timer.unref()
  leg.once('close', () => { clearTimeout(timer) })
}

/** The high-water mark's floor: below it, pausing costs round trips and saves nothing. */
const HIGH_WATER_FLOOR = 64 * 1024

/**
 * The bytes that may wait to be sent on one leg before the gateway stops reading the other:
 * two messages of the route's largest, at least 64 KiB. What a leg holds stays under this plus
 * one message and one socket read (what ws has already received when reading stops).
 */
export function websocketHighWater (maxMessage: number): number {
  return Math.max(2 * maxMessage, HIGH_WATER_FLOOR)
}

/** The hooks of one route's websockets, called by the link (websocket-link.ts) before each message, ping or pong it passes on. */
export interface WebSocketHooks {
  onConnect: (context: unknown, source: WebSocket, target: WebSocket) => void
  onIncomingMessage: (context: unknown, source: WebSocket, target: WebSocket, message: { data: Buffer | ArrayBuffer | Buffer[] }) => void
  onOutgoingMessage: (context: unknown, source: WebSocket, target: WebSocket, message: { data: Buffer | ArrayBuffer | Buffer[] }) => void
}

/**
 * Hooks that close both legs with 1009 for a message too big and apply backpressure: before the
 * proxy sends a message read on one leg, reading that leg stops while the other is still
 * connecting or has more than `websocketHighWater(maxMessage)` bytes unsent, and resumes once it
 * is open and has written them out. `onOpen`: told of both legs once they are open (the sockets
 * that end with their session, proxy/session-sockets.ts).
 */
export function websocketHooks (maxMessage: number, onOpen?: (source: WebSocket, target: WebSocket) => void): WebSocketHooks {
  const highWater = websocketHighWater(maxMessage)
  return {
    onConnect: onOpen === undefined
      ? passTooBig
      : (context, source, target) => {
          passTooBig(context, source, target)
          onOpen(source, target)
        },
    onIncomingMessage: (_context, source, target, { data }) => { throttle(source, target, byteLength(data), highWater) },
    onOutgoingMessage: (_context, source, target, { data }) => { throttle(target, source, byteLength(data), highWater) },
  }
}

/** Legs whose reading may be paused, with a close listener on the other leg that resumes them. */
const watched = new WeakSet<WebSocket>()

/**
 * Called before the proxy sends `size` bytes read on `from` to `to`: pauses `from` when `to`
 * cannot take them, then waits for `to` to drain.
 */
function throttle (from: WebSocket, to: WebSocket, size: number, highWater: number): void {
  if (from.isPaused || from.readyState !== OPEN) return
  if (to.readyState === OPEN && to.bufferedAmount + size <= highWater) return
  if (!watched.has(from)) {
    watched.add(from)
    // A paused leg could not read the closing handshake the proxy starts when the other leg closes.
    to.once('close', () => from.resume())
  }
  from.pause()
  drained(from, to, highWater)
}

/** Resumes `from` once `to` is open and under half the high-water mark, re-checking each time its queue is written out. */
function drained (from: WebSocket, to: WebSocket, highWater: number): void {
  if (to.readyState === CONNECTING) {
    to.once('open', () => drained(from, to, highWater))
    return
  }
  if (to.readyState !== OPEN) return
  if (to.bufferedAmount <= highWater / 2) {
    from.resume()
    return
  }
  // ws has no drain event; a frame's callback runs once everything queued before it is written
  // out, and an unsolicited Pong is the one frame the peer does not answer.
  to.pong((error?: Error) => { if (!error) drained(from, to, highWater) })
}

/** The bytes of a message as ws hands it over (a Buffer, or its fragments, or an ArrayBuffer). */
function byteLength (data: Buffer | ArrayBuffer | Buffer[]): number {
  return Array.isArray(data) ? data.reduce((sum, part) => sum + part.length, 0) : data.byteLength
}

/**
 * Once both legs of a proxied websocket are open: a message over websocketMaxMessage on one leg
 * (ws closes that leg with 1009) closes the other with 1009 too, so each end learns why; the proxy
 * itself would say 1011. A client leg that has already closed while the upstream's was opening
 * closes the upstream's.
 */
export function passTooBig (_context: unknown, source: WebSocket, target: WebSocket): void {
  if (source.readyState !== OPEN) {
    closeLeg(target, 1009, 'Message too big')
    return
  }
  for (const [from, to] of [[source, target], [target, source]] as const) {
    // Before the link's own listener, which closes the other leg with 1014 or 1001 (websocket-link.ts).
    from.prependListener('error', (error: Error & { code?: string }) => {
      if (error.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' && to.readyState === OPEN) closeLeg(to, 1009, 'Message too big')
    })
  }
}
