// neostandard's style rules, plus typescript-eslint's type-checked rules for the mistakes types can
// catch: a promise nobody awaits, a promise where a callback must return nothing, awaiting a
// non-promise, a switch that misses a case of a union.
import neostandard from 'neostandard'
import tseslint from 'typescript-eslint'

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
    // Sessions are plain values and functions over a Cookie header: no web framework inside;
    // the Fastify side lives in src/http/session-cookie.ts.
    files: ['src/session/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [{ group: ['fastify', 'fastify/*', '@fastify/*'], message: 'src/session/ stays free of Fastify: take a Cookie header, return values; the glue is src/http/session-cookie.ts.' }],
      }],
    },
  },
]
