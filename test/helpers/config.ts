// A config's problems as `--check` lists them (`key.path: message (line N)`), or [] when it is
// valid: what the config tables of test/config/ and test/security/ compare.
import { ConfigError, parseConfig } from '../../src/config/config.js'

export function configProblems (text: string, env: Record<string, string> = {}): string[] {
  try {
    parseConfig(text, env)
  } catch (error) {
    if (error instanceof ConfigError) return error.issues
    throw error
  }
  return []
}
