// neostandard's style rules, plus typescript-eslint's type-checked rules for the mistakes types can
// catch: a promise nobody awaits, a promise where a callback must return nothing, awaiting a
// non-promise, a switch that misses a case of a union.
import neostandard from 'neostandard'
import tseslint from 'typescript-eslint'
import { LAYERS, layersPlugin, restrictedFor } from './eslint/layers.js'

export default [
  ...neostandard({ ts: true, ignores: ['dist/**', 'node_modules/**', 'test/artifacts/**', '.ci-node/**', 'src/config/schema.generated.ts'] }),
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      // `void promise` is how a deliberately unawaited promise is marked.
      'no-void': ['error', { allowAsStatement: true }],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
    },
  },
  {
    files: ['src/**/*.ts'],
    plugins: { layers: layersPlugin },
    rules: {
      'layers/no-import-cycle': 'error',
      // Functions a reader can hold in their head: the code meets these (docs/architecture.md).
      complexity: ['error', 20],
      'max-lines-per-function': ['error', { max: 60, skipBlankLines: true, skipComments: true }],
      // Files a reader can hold in their head too: a file past 400 lines, comments included, is
      // split by what it holds (config/validate/ by section, session/ by concern).
      'max-lines': ['error', { max: 400 }],
    },
  },
  // One block per folder: what it may import (eslint/layers.js, drawn in docs/architecture.md).
  ...Object.keys(LAYERS).map((folder) => ({
    files: [`src/${folder}/**/*.ts`],
    rules: { 'no-restricted-imports': ['error', { patterns: restrictedFor(folder) }] },
  })),
  {
    // The errors catalogue is a leaf: every folder imports it, it imports nothing of the gateway.
    files: ['src/errors.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ group: ['./*'], message: 'src/errors.ts is a leaf.' }] }] },
  },
  {
    // One clock: what "now" is comes from the injected Clock, so tests move time instead
    // of waiting on it or spying on Date.now; only src/ops/clock.ts reads the wall clock.
    files: ['src/**/*.ts'],
    ignores: ['src/ops/clock.ts'],
    rules: {
      'no-restricted-properties': ['error', { object: 'Date', property: 'now', message: 'Take the injected Clock (src/ops/clock.ts) instead of reading the wall clock.' }],
      'no-restricted-syntax': ['error', { selector: "NewExpression[callee.name='Date'][arguments.length=0]", message: 'Take the injected Clock (src/ops/clock.ts): new Date(clock.now()) instead of new Date().' }],
    },
  },
]
