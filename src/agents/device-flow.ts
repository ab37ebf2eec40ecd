// The device flow's pages as oidc-provider asks for them (RFC 8628 §3.3): the code entry, its
// confirmation and the last page, in the gateway's look (http/agent-pages.ts). The last page is
// kept for as long as a code lives, under its address (`/oauth/agents/device/<uid>`) and the
// browser's session: reloaded, it says the CLI is signed in (an attacker's finding: it showed the
// code entry saying that did not work).
import { createHash } from 'node:crypto'
import type { Configuration, KoaContextWithOIDC } from 'oidc-provider'
import type { KeyValue } from '../store/store.js'

/** The pages of the device flow: each gets oidc-provider's form (its CSRF field) to show. */
export interface DevicePages {
  /** Where the person types the code their CLI shows; `problem` says why the last one did not work. */
  input: (form: string | undefined, problem: string | undefined) => string
  /** The code entered, the client that asked for it and the route (absent: unknown): the person confirms them before signing in. */
  confirm: (form: string, clientName: string, userCode: string, routePath: string | undefined) => string
  /** Allowed: the CLI has its tokens at its next poll. */
  done: (clientName: string) => string
}

type DeviceFlow = NonNullable<NonNullable<Configuration['features']>['deviceFlow']>

/** A client's name as the pages show it. */
export function clientName (client: { clientName?: unknown } | undefined): string {
  const name = client?.clientName
  return typeof name === 'string' && name !== '' ? name : 'An unnamed client'
}

/** The route a device code's tokens would reach, for its first page (an outside tester's finding: it named the client only). */
function deviceRoute (ctx: KoaContextWithOIDC, resources: ReadonlyMap<string, string>): string | undefined {
  const asked: unknown = ctx.oidc.entities.DeviceCode?.params?.resource
  const resource = typeof asked === 'string' ? asked : Array.isArray(asked) && asked.length === 1 ? asked[0] as unknown : resources.size === 1 ? [...resources.keys()][0] : undefined
  return typeof resource === 'string' ? resources.get(resource) : undefined
}

/** Why the code the person entered did not work, in words (oidc-provider's errors are its own). */
function codeProblem (error: Error | undefined): string | undefined {
  if (error === undefined) return undefined
  if (error.name === 'AbortedError') return 'You stopped that sign-in; your CLI will say it was refused.'
  if ('userCode' in error || error.name === 'NoCodeError') return 'That code is not one this gateway gave, or it has expired or was used already: check it against the one your CLI shows.'
  // The form's CSRF field (a page opened again in another tab, or open too long): the code still holds.
  const description = (error as { error_description?: unknown }).error_description
  if (typeof description === 'string' && description.startsWith('xsrf')) return 'This page was opened again in another tab, or was open too long: enter the code again.'
  // The page after the sign-in and consent, in another browser or after its code's time.
  return 'That did not work. If your CLI says it is signed in, you are done; if it still waits, enter its code again; otherwise start again from your CLI.'
}

/** The code entry's problem when the browser holds no live session of the server's (the form was made elsewhere, or too long ago). */
const NO_LIVE_SESSION = 'This page was open too long, or was not opened in this browser, or the browser keeps no cookies for this site: open the device page again and enter the code there.'

/** A page of the gateway's (its headers: unframed). */
const page = (ctx: KoaContextWithOIDC, html: string): void => { ctx.type = 'html'; ctx.body = html }

/** Where the last page of the sign-in at this address, in this browser, is kept: a hash of both. */
function doneKey (ctx: KoaContextWithOIDC): string | undefined {
  const uid: unknown = (ctx as { params?: { uid?: unknown } }).params?.uid
  const browser = ctx.oidc.session?.uid
  if (typeof uid !== 'string' || browser === undefined) return undefined
  return `agents:device-done:${createHash('sha256').update(`${uid}\n${browser}`).digest('base64url')}`
}

/**
 * oidc-provider's page sources of the device flow. `store` keeps each last page's client name for
 * `keepMs` (a code's lifetime), best effort: a store that fails leaves the reload's page as it was.
 */
export function devicePageSources (pages: DevicePages, resources: ReadonlyMap<string, string>, store: Pick<KeyValue, 'get' | 'set'>, keepMs: number): Pick<DeviceFlow, 'userCodeInputSource' | 'userCodeConfirmSource' | 'successSource'> {
  return {
    userCodeInputSource: async (ctx, form, _out, error) => {
      const key = error !== undefined && ctx.oidc.route === 'device_resume' ? doneKey(ctx) : undefined
      const done = key === undefined ? null : await store.get(key).catch(() => null)
      if (done !== null) {
        ctx.status = 200
        return page(ctx, pages.done(done))
      }
      // A session the failed request began is not kept (keepNoUnsavedSession): its form could not be sent.
      const unkept = error !== undefined && typeof ctx.oidc.session?.exp !== 'number'
      page(ctx, unkept ? pages.input(undefined, NO_LIVE_SESSION) : pages.input(form, codeProblem(error)))
    },
    userCodeConfirmSource: (ctx, form, client, _info, userCode) => { page(ctx, pages.confirm(form, clientName(client), userCode, deviceRoute(ctx, resources))) },
    successSource: async (ctx) => {
      const name = clientName(ctx.oidc.client)
      const key = doneKey(ctx)
      if (key !== undefined) await store.set(key, name, keepMs).catch(() => {})
      page(ctx, pages.done(name))
    },
  }
}
