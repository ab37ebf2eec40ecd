// A websocket opened through the gateway as a test's client, both legs open, and the bound a test
// gives the gateway to close it once the event that ends it has come.
import { WebSocket } from 'ws'
import { expect } from 'vitest'
import { ONE_ANSWER_MS } from './bounds.js'

/** A websocket through the gateway whose echo has gone through (the client's leg and the upstream's open). */
export interface EchoSocket {
  socket: WebSocket
  /** How the gateway closed the client's socket: code and reason. */
  closed: Promise<{ code: number, reason: string }>
  /** Sends `text` and resolves with the upstream's echo. */
  echo (text: string): Promise<string>
}

/**
 * Opens a websocket at `url` (ws://) with `headers`, kept in `opened` for the file's cleanup, and
 * sends `hello`, which an echo upstream answers `echo hello`. Rejects with "handshake answered
 * <status>" when the gateway refuses the upgrade.
 */
export async function openEcho (url: string, headers: Record<string, string>, opened: WebSocket[]): Promise<EchoSocket> {
  const socket = new WebSocket(url, { headers })
  opened.push(socket)
  const closed = new Promise<{ code: number, reason: string }>((resolve) => socket.once('close', (code, reason) => resolve({ code, reason: reason.toString() })))
  await new Promise((resolve, reject) => {
    socket.once('open', resolve)
    socket.once('unexpected-response', (_request, response) => reject(new Error(`handshake answered ${response.statusCode}`)))
    socket.once('error', reject)
  })
  const echo = async (text: string) => await new Promise<string>((resolve) => {
    socket.once('message', (data) => resolve(String(data)))
    socket.send(text)
  })
  expect(await echo('hello')).toBe('echo hello')
  return { socket, closed, echo }
}

/** What `ended` resolves with, or 'open' when it has not within ONE_ANSWER_MS of real time. */
export async function settledWithin<T> (ended: Promise<T>): Promise<T | 'open'> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<'open'>((resolve) => { timer = setTimeout(() => resolve('open'), ONE_ANSWER_MS) })
  try {
    return await Promise.race([ended, late])
  } finally {
    clearTimeout(timer)
  }
}
