// What a test that times the gateway allows besides the product's own timeouts. A bound on an
// answer is the timeout that cuts the wait (a route's, a provider's, the store's), written as that
// configured value, plus ONE_ANSWER_MS for the answer's own work: never a guess in place of the
// timeout, so that a bound moves with the timeout it stands for.

/**
 * The gateway's own work for one answer once the timeout that bounds it has fired (or the work
 * that needs no timeout at all): the same for one request or 300 (test/faults/hung-upstream.test.ts).
 */
export const ONE_ANSWER_MS = 1000
