// A front controller's route in a POST body. Yii 1 reads its route from `r` in the query, and from
// a POST form when the query has none (CUrlManager::parseUrl: `$_GET['r']`, then `$_POST['r']`), so
// a `deny` glob on the path it routes to must hold on a form posted to the front controller
// (`POST /app/index.php` with `r=admin/users` in the body) as it holds on `?r=admin/users`. The
// hook (routes/method-override-hook.ts) reads such a body on a route whose `deny` rules name paths,
// and judges the request again as the target made here, which the rules read as they read a query.
import { POSTED_ROUTE_FIELD, postedRouteValues, scriptRun } from '../config/path-fold.js'
import { multipartValues } from './form-fields.js'
import type { FormKind } from './method-override.js'

/** Whether a POST body of `kind` to `target` may carry a route: a form (PHP reads urlencoded and multipart ones) to a path a front controller serves. */
export function mayPostRoute (kind: FormKind | undefined, target: string): boolean {
  if (kind !== 'urlencoded' && kind !== 'multipart') return false
  const queryAt = target.indexOf('?')
  const path = queryAt === -1 ? target : target.slice(0, queryAt)
  // A directory, a script, or a path a script runs (scriptRun reads segments a `/` follows).
  return path.endsWith('/') || scriptRun(`${path}/`) !== undefined
}

/** What a POST body routes to: nothing, a target to judge, or what cannot be told (a `deny` on a path holds). */
export type PostedRoute = { readonly routes: false } | { readonly routes: true, readonly target: string } | { readonly routes: 'untold' }

const NONE: PostedRoute = Object.freeze({ routes: false })
const UNTOLD: PostedRoute = Object.freeze({ routes: 'untold' })

/**
 * The route a POST body of `kind` to `target` names: `target`'s path with the body's route values
 * as `?r=` (an urlencoded body's as written, as PHP decodes a body as it decodes a query; a
 * multipart one's percent-encoded, as PHP reads a part's bytes as they are).
 */
export function postedRoute (kind: FormKind, body: Buffer, contentType: string | undefined, target: string): PostedRoute {
  let values: string[] | undefined
  if (kind === 'urlencoded') {
    values = postedRouteValues(body.toString('latin1'))
  } else {
    const found = multipartValues(body, contentType ?? '', POSTED_ROUTE_FIELD)
    values = found.includes(undefined) ? undefined : found.flatMap((value) => value === undefined || value === '' ? [] : [encodeURIComponent(value)])
  }
  if (values === undefined) return UNTOLD
  if (values.length === 0) return NONE
  const queryAt = target.indexOf('?')
  const path = queryAt === -1 ? target : target.slice(0, queryAt)
  return { routes: true, target: `${path}?${values.map((value) => `${POSTED_ROUTE_FIELD}=${value}`).join('&')}` }
}
