// Method overrides: the `_method` field that Rails (Rack::MethodOverride), Laravel and Symfony read
// to treat a POST as the method it names, so that a rule judged on the POST also holds for the method
// the application acts on. Found in the query (`?_method=`: Laravel and Symfony read it), in a form
// body (urlencoded, or any `multipart/*`, its parts found and named as form-fields.ts says),
// in a POST without a Content-Type (Rack parses it as a form), and at the top level of a JSON body
// (Laravel reads its JSON input as the form whenever the whole Content-Type header, parameters
// included, names JSON: `text/plain; x=/json` too, and a form whose header does is read both ways).
// A field name counts in every spelling PHP reads as `_method` (cut at a NUL, a leading space
// dropped, `.` and ` ` read as `_`, and `_method[...]`; percent-decoded as PHP does, each `%XX` on
// its own) and Rack 2.2 does (`[_method]`, `_method]`). A body is read without a leading UTF-8
// byte order mark, as Express's body-parser reads it; one in a character set that could spell
// `_method` in other bytes is not read at all (the hook refuses it).
// Every value found is judged, as the upper case the frameworks compare; a value that is no method
// token is a method that cannot be told, which `allow` rules refuse (rules.ts).
import type { Identity } from '../session/record.js'
import type { RuleLists } from '../config/types.js'
import { phpDecode } from '../config/path-fold.js'
import { formDecode, isField, multipartValues } from './form-fields.js'
import type { Judge, Judgement } from './rules.js'

/** The body kinds that may carry a `_method` field. */
export type FormKind = 'urlencoded' | 'multipart' | 'json'

/** Whether a form field name is read as `_method` by one of the frameworks (see the header). */
export function isOverrideField (name: string): boolean {
  return isField(name, FIELD)
}

const FIELD = '_method'
const TOKEN = /^[A-Z]+$/

/** Whether any `allow` or `deny` rule of `lists` names methods: only such routes look for overrides. */
export function namesMethods (lists: RuleLists): boolean {
  return [...(lists.allow ?? []), ...lists.deny].some((rule) => rule.methods.length > 0)
}

/**
 * The media type of a Content-Type value: lower case, cut at the first `;`, `,` or white space, as
 * PHP cuts it before it fills `$_POST` (main/SAPI.c; Rack cuts at `,` too): PHP reads
 * `application/x-www-form-urlencoded,text/plain` as a form (an outside tester's finding: such a
 * form's `r` and `_method` were not read).
 */
export function mediaType (contentType: string): string {
  const type = contentType.trimStart()
  const end = type.search(/[;,\s]/)
  return (end === -1 ? type : type.slice(0, end)).toLowerCase()
}

/** Laravel's isJson(): the whole Content-Type header, parameters included, contains `/json` or `+json`. */
function namesJson (contentType: string | undefined): boolean {
  const header = contentType?.toLowerCase() ?? ''
  return header.includes('/json') || header.includes('+json')
}

/**
 * The kind of a POST body an application may read `_method` from, or undefined when none reads it
 * (the body then streams on unread). No Content-Type at all is a form to Rack.
 */
export function formKind (contentType: string | undefined): FormKind | undefined {
  if (contentType === undefined || contentType.trim() === '') return 'urlencoded'
  const type = mediaType(contentType)
  if (type === 'application/x-www-form-urlencoded') return 'urlencoded'
  if (type.startsWith('multipart/')) return 'multipart'
  if (namesJson(contentType)) return 'json'
  return undefined
}

/** The method a `_method` value names: upper case, or undefined (cannot be told) when it is no method token. */
export function overrideMethod (value: string): string | undefined {
  const method = value.toUpperCase()
  return TOKEN.test(method) ? method : undefined
}

/**
 * The values of `_method` fields in urlencoded text (a query, or a body), split at `&` and at `;`
 * (Rack 2 splits at both). Empty values name nothing, as in every framework.
 */
function urlencodedValues (text: string): string[] {
  const values: string[] = []
  for (const pair of text.split(/[&;]/)) {
    const equals = pair.indexOf('=')
    const name = pair.slice(0, equals)
    if (equals === -1 || !(isOverrideField(formDecode(name)) || isOverrideField(phpDecode(name)))) continue
    const value = formDecode(pair.slice(equals + 1))
    if (value !== '') values.push(value)
  }
  return values
}

/** The methods named by `?_method=` in a canonical request target (undefined: a value that is no method). */
export function queryOverrides (target: string): Array<string | undefined> {
  const query = target.indexOf('?')
  return query === -1 ? [] : urlencodedValues(target.slice(query + 1)).map(overrideMethod)
}

/** A JSON body's top-level `_method`, when it is an object that has one: a value that is no string names no method that can be told. */
function jsonOverrides (body: Buffer): Array<string | undefined> {
  let parsed: unknown
  try {
    parsed = JSON.parse(withoutBom(body).toString('utf8'))
  } catch {
    return []
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed) || !Object.hasOwn(parsed, FIELD)) return []
  const value = (parsed as Record<string, unknown>)[FIELD]
  if (value === '' || value === null) return []
  return [typeof value === 'string' ? overrideMethod(value) : undefined]
}

const BOM = Buffer.from([0xef, 0xbb, 0xbf])

/** `body` without a leading UTF-8 byte order mark, which Express's body-parser drops before it parses (iconv-lite). */
function withoutBom (body: Buffer): Buffer {
  return body.subarray(0, 3).equals(BOM) ? body.subarray(3) : body
}

/** The character sets in which `_method` is the same bytes as in UTF-8 (body-parser reads urlencoded bodies in the first and last only). */
const ASCII_CHARSETS = new Set(['utf-8', 'utf8', 'us-ascii', 'ascii', 'iso-8859-1', 'latin1'])

/**
 * The `charset` a form or JSON body's Content-Type names, when it is one in which an application
 * could read `_method` from other bytes than the gateway does (Express's body-parser decodes a JSON
 * body in any UTF: `{"+AF8-method":"DELETE"}` in UTF-7 is `{"_method":"DELETE"}` to it); undefined
 * when it names none or one of {@link ASCII_CHARSETS}.
 */
export function unreadCharset (contentType: string | undefined): string | undefined {
  for (const parameter of (contentType ?? '').split(';').slice(1)) {
    const equals = parameter.indexOf('=')
    if (equals === -1 || parameter.slice(0, equals).trim().toLowerCase() !== 'charset') continue
    const charset = parameter.slice(equals + 1).trim().replace(/^"(.*)"$/, '$1').toLowerCase()
    if (!ASCII_CHARSETS.has(charset)) return charset
  }
  return undefined
}

/** The methods a POST body of `kind` names in `_method` fields (undefined: a value that is no method). */
export function bodyOverrides (kind: FormKind, body: Buffer, contentType: string | undefined): Array<string | undefined> {
  if (kind === 'json') return jsonOverrides(body)
  const values = kind === 'urlencoded' ? urlencodedValues(withoutBom(body).toString('utf8')) : multipartValues(body, contentType ?? '', FIELD)
  const named = values.filter((value) => value !== '').map((value) => value === undefined ? undefined : overrideMethod(value))
  // A form whose header also names JSON (`; x=+json`): Laravel reads it as JSON.
  return namesJson(contentType) ? [...named, ...jsonOverrides(body)] : named
}

/**
 * The first refusal of `judge` for any of the override `methods` on `target` from `address` (signed in at `provider`), or undefined when the
 * rules admit each of them (the request's own method was judged before).
 */
export function forbiddenOverride (judge: Judge, identity: Identity | undefined, target: string, address: string | undefined, methods: ReadonlyArray<string | undefined>, provider?: string): (Judgement & { readonly method: string | undefined }) | undefined {
  for (const method of new Set(methods)) {
    const judgement = judge(identity, method, target, address, provider)
    if (!judgement.admit) return { ...judgement, method }
  }
  return undefined
}
