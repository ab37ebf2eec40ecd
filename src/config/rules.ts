// Allow rules in the one form they are compared in: a route's `allow`, a forward-auth host's rules
// and forward-auth's query rules all pass through `normalisedRule`.
import type { AllowRules } from './types.js'

/**
 * A rule's conditions as written (config or query), in the form rules compare: trimmed, lower-case
 * e-mails and domains, no `@`, no blank values (which could match nothing).
 */
export function normalisedRule (raw: { emails?: readonly string[], domains?: readonly string[], groups?: readonly string[] }): AllowRules {
  const values = (list: readonly string[] | undefined, form: (value: string) => string): string[] =>
    (list ?? []).map((value) => form(value.trim())).filter((value) => value !== '')
  return {
    emails: values(raw.emails, (email) => email.toLowerCase()),
    domains: values(raw.domains, (domain) => domain.toLowerCase().replace(/^@/, '')),
    groups: values(raw.groups, (group) => group),
  }
}
