// SIGTERM and SIGINT start one graceful shutdown. Later signals are logged and ignored. Ctrl-C
// under `npm start` reaches the gateway twice: once from the terminal (the whole process group)
// and once from npm, which passes it on. With a one-time handler, the second signal took Node's
// default action and killed the shutdown under way. server.shutdownTimeout still bounds the
// shutdown; SIGKILL ends it at once.

/** Where a repeated signal is told. */
export interface SignalLog {
  info (fields: object, message: string): void
}

/** Calls `stop` on the first SIGTERM or SIGINT; each later one is logged, not acted on. */
export function onStopSignal (log: SignalLog, stop: (signal: NodeJS.Signals) => void): void {
  let stopping = false
  const handle = (signal: NodeJS.Signals): void => {
    if (stopping) {
      log.info({ signal }, 'already shutting down: the shutdown under way finishes (server.shutdownTimeout bounds it)')
      return
    }
    stopping = true
    stop(signal)
  }
  process.on('SIGTERM', handle)
  process.on('SIGINT', handle)
}
