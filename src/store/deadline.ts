// A command's deadline, judged after the event loop has read what its sockets hold. Node runs due
// timers before it reads the sockets (the timers phase comes before the poll phase), so a timer
// that rejects at once, as ioredis's commandTimeout does, fails a command whose reply is already
// waiting whenever the process was kept from the CPU for longer than the timeout (a long GC pause,
// a machine busy with other work): the gateway then answers 503 for a store that answered in time.
// Here the due timer only schedules the check for the check phase, which comes after the poll
// phase has read the reply; a reply that truly has not come by then still fails the command.
// @see https://nodejs.org/en/learn/asynchronous-work/event-loop-timers-and-nexttick

/** ioredis's own words for a command that timed out, which the outage lines have always given as the cause. */
export const COMMAND_TIMED_OUT = 'Command timed out'

/** `answer`, or an Error "Command timed out" when it has not settled within `timeoutMs` and the sockets read since. */
export function answeredWithin<T> (answer: Promise<T>, timeoutMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    // Settled first, the promise ignores the later reject.
    const timer = setTimeout(() => setImmediate(() => reject(new Error(COMMAND_TIMED_OUT))), timeoutMs)
    answer.then((value) => {
      clearTimeout(timer)
      resolve(value)
    }, (error: unknown) => {
      clearTimeout(timer)
      reject(error)
    })
  })
}
