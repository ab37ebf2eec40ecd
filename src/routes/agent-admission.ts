// Whether the person who signed in for an agent may allow it: the route's own rules, judged as the
// grant's requests will be, before any consent page is shown or answered; and where that sign-in starts.
import { compileGate, decide, signedIn } from '../access/gate.js'
import { named, nameSpaces } from '../access/name-spaces.js'
import type { PendingSignIn } from '../agents/pending.js'
import { requestSpelling } from '../config/canonical.js'
import type { GatewayConfig, RouteConfig } from '../config/types.js'
import { GatewayError } from '../errors.js'
import { loginUrl } from '../oauth/urls.js'

/** The person's name for the grant, once `route`'s rules admit them at all; otherwise 403. */
export function admittedAs (config: GatewayConfig, route: RouteConfig, signIn: PendingSignIn, address: string): string {
  const provider = route.provider!
  const identity = signIn.signIn.identity
  const token = signIn.signIn.tokens.access_token
  if (signIn.provider !== provider || identity === undefined) throw new GatewayError('forbidden', 'The sign-in gave no identity this gateway can name.')
  const gate = compileGate({ ...route, spaces: nameSpaces(config.providers) }, (next) => loginUrl(config, provider, next))
  // Judged under the name the route gives the person (name-spaces.ts), as the grant's requests will be.
  const decision = decide(gate, { method: 'GET', target: route.path, address }, false, signedIn(token, named(identity, provider, provider, gate.spaces)))
  if (decision.kind === 'forbidden') throw new GatewayError('forbidden', `This account may not use ${route.path}, so it cannot allow an agent there.`)
  return identity.sub
}

/** The sign-in at the route's provider that an agent's authorization starts. */
export function loginUrlFor (config: GatewayConfig, route: RouteConfig): string {
  // Its `agent` binding decides where it goes; `next` names the route, whose `reauth` then asks for max_age (an agent was refused on every such route).
  return loginUrl(config, route.provider!, `${requestSpelling(route.path).replace(/\/$/, '')}/`)
}
