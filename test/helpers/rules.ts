// Rules as the config makes them (src/config/rule-lists.ts), for tests that build gates by hand.
import { normalisedRule, type RuleYaml } from '../../src/config/rule-lists.js'
import type { Rule, RuleLists } from '../../src/config/types.js'

/** One rule, named as the config would name the `index`th of `list`. */
export function rule (conditions: RuleYaml, name = 'allow[0]'): Rule {
  return normalisedRule(name, conditions)
}

/** `allow` and `deny` lists, each rule named by its place (`allow[0]`, `deny[1]`). */
export function lists (allow: RuleYaml[] | undefined, deny: RuleYaml[] = []): RuleLists {
  return {
    allow: allow?.map((conditions, i) => normalisedRule(`allow[${i}]`, conditions)),
    deny: deny.map((conditions, i) => normalisedRule(`deny[${i}]`, conditions)),
  }
}

/** The earlier object form of a route's `allow` (any of its conditions admits), as the config reads it. */
export function anyOf (conditions: { emails?: string[], domains?: string[], groups?: string[] }): RuleLists {
  const given = (['emails', 'domains', 'groups'] as const).filter((key) => conditions[key] !== undefined)
  return { allow: given.map((key) => normalisedRule(`allow.${key}`, { [key]: conditions[key] })), deny: [] }
}

export const NO_RULES: RuleLists = Object.freeze({ allow: undefined, deny: [] }) as RuleLists
