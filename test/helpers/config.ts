// A config's problems as `--check` lists them (`key.path: message (line N)`), or [] when it is
// valid: what the config tables of test/config/ and test/security/ compare.
import { ConfigError, parseConfig, type ConfigProblem } from '../../src/config/config.js'

export function configProblems (text: string, env: Record<string, string> = {}): string[] {
  try {
    parseConfig(text, env)
  } catch (error) {
    if (error instanceof ConfigError) return error.issues
    throw error
  }
  return []
}

/** The same problems as objects (path, line, message, hint), for tables that compare their parts. */
export function configProblemList (text: string, env: Record<string, string> = {}): ConfigProblem[] {
  try {
    parseConfig(text, env)
  } catch (error) {
    if (error instanceof ConfigError) return error.problems
    throw error
  }
  return []
}
