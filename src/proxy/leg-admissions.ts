// Which upgrade an upstream websocket leg was made for. A registry that must know what let a socket
// through (a session: session-sockets.ts; a bearer token: bearer-sockets.ts) keeps it by request
// (admit) from the route's access hooks, has it handed over just before the upstream leg is created
// for that request (handing), ties it to that leg in the same synchronous step (opening,
// routes/websocket-route.ts), and reads it back once both legs are open (of).
import type { WebSocket } from 'ws'

export class LegAdmissions<T> {
  private readonly admitted = new WeakMap<object, T>()
  private readonly legs = new WeakMap<WebSocket, T>()
  /** The admission of the upgrade whose upstream leg is being created right now. */
  private handed: T | undefined

  /** Keeps what let `request` (an upgrade) through. */
  admit (request: object, admission: T): void {
    this.admitted.set(request, admission)
  }

  /** The upstream leg of `request`'s websocket is about to be created. */
  handing (request: object): void {
    this.handed = this.admitted.get(request)
  }

  /** The upstream leg just created belongs to the request last handed. */
  opening (target: WebSocket): void {
    if (this.handed !== undefined) this.legs.set(target, this.handed)
    this.handed = undefined
  }

  /** What let the upstream leg `target` through; undefined: nothing this registry keeps. */
  of (target: WebSocket): T | undefined {
    return this.legs.get(target)
  }
}
