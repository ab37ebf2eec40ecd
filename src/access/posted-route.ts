// A front controller's route in a POST body. Yii 1 reads its route from `r` in the query, and from
// a POST form when the query has none (CUrlManager::parseUrl: `$_GET['r']`, then `$_POST['r']`), so
// a `deny` glob on the path it routes to must hold on a form posted to the front controller
// (`POST /app/index.php` with `r=admin/users` in the body) as it holds on `?r=admin/users`. The
// hook (routes/method-override-hook.ts) reads such a body on a route whose `deny` rules name paths,
// and judges the request again as the target made here, which the rules read as they read a query.
import { routeValues, scriptRun, UNTOLD_ROUTE_QUERY } from '../config/path-fold.js'
import { multipartValues } from './form-fields.js'
import { pathOf } from './glob.js'
import { mediaType, type FormKind } from './method-override.js'

/** The route field a front controller reads in a POST body: Yii 1's `r`. */
const FIELD = 'r'
const FIELDS: ReadonlySet<string> = new Set([FIELD])

/**
 * The kind of form a POST with `contentType` to `target` may carry a route in, or undefined: a form
 * PHP fills `$_POST` from (its Content-Type, cut as PHP cuts it, is `application/x-www-form-urlencoded`
 * or `multipart/form-data`: no Content-Type, `multipart/related` or JSON fill none: an outside
 * reader's finding, such uploads were read to no purpose) to a path a front controller serves: a
 * directory, a script, or a path a script runs.
 */
export function postedRouteKind (contentType: string | undefined, target: string): FormKind | undefined {
  if (contentType === undefined) return undefined
  const type = mediaType(contentType)
  const kind = type === 'application/x-www-form-urlencoded' ? 'urlencoded' : type === 'multipart/form-data' ? 'multipart' : undefined
  const path = pathOf(target)
  // scriptRun reads segments a `/` follows.
  return kind !== undefined && (path.endsWith('/') || scriptRun(`${path}/`) !== undefined) ? kind : undefined
}

/**
 * The target to judge for the route a POST body of `kind` to `target` names, or undefined when it
 * names none: `target`'s path with the body's route values as `?r=` (an urlencoded body's as
 * written, as PHP decodes a body as it decodes a query; a multipart one's percent-encoded, as PHP
 * reads a part's bytes as they are), or with a query the rules cannot tell where the body's cannot
 * be (more different values than a query may give, more parts than Rack reads), so that a `deny`
 * on a path holds as it does on such a query, and only where the rule's other conditions do.
 * Every copy is judged, so a form of many fields is read whatever PHP's max_input_vars.
 */
export function postedRoute (kind: FormKind, body: Buffer, contentType: string | undefined, target: string): string | undefined {
  let values: string[] | undefined
  if (kind === 'urlencoded') {
    const found = new Set<string>()
    values = routeValues(body.toString('latin1'), '&', found, FIELDS, Infinity) ? [...found] : undefined
  } else {
    const found = multipartValues(body, contentType ?? '', FIELD)
    values = found.includes(undefined) ? undefined : found.flatMap((value) => value === undefined || value === '' ? [] : [encodeURIComponent(value)])
  }
  if (values?.length === 0) return undefined
  const query = values === undefined ? UNTOLD_ROUTE_QUERY : values.map((value) => `${FIELD}=${value}`).join('&')
  return `${pathOf(target)}?${query}`
}
