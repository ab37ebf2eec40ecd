// Which route a sign-in is for (a route's `reauth:`, step-up): the route that serves the sign-in's
// `next`, found as the router finds it, so that the login endpoint asks the provider for what that
// route needs (`max_age`, `acr_values`) and the callback checks that it was given. Whether a
// sign-in is recent enough is oauth/step-up.ts's.
import type { ReauthConfig, RouteConfig } from '../config/types.js'
import { covers } from './gate.js'

/**
 * The route that serves `target` (a canonical path, with its query if any): of the routes whose
 * path covers it as the gate's row 1 judges, the longest, as the router picks the most specific
 * prefix. Undefined when none does.
 */
export function routeFor<R extends Pick<RouteConfig, 'path'>> (routes: readonly R[], target: string): R | undefined {
  let found: R | undefined
  for (const route of routes) {
    if (covers(route.path, target) && (found === undefined || route.path.length > found.path.length)) found = route
  }
  return found
}

/** The step-up that a sign-in at `provider` toward `target` (canonical) must meet: the `reauth` of the route serving it, when that route signs in there. */
export function reauthFor (routes: readonly RouteConfig[], provider: string, target: string): ReauthConfig | undefined {
  const route = routeFor(routes, target)
  return route !== undefined && route.auth === 'required' && route.provider === provider ? route.reauth : undefined
}
