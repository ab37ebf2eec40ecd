// The names `preset:` accepts, as a value the schema (build time) and validation (run time) both
// read: a leaf of its own, since the schema module imports TypeBox, a devDependency the image does
// not ship.
import type { PresetName } from './types.js'

/** The presets (presets.ts), in the order the docs list them. */
export const PRESET_NAMES = ['github', 'gitlab', 'google', 'microsoft', 'keycloak'] as const satisfies readonly PresetName[]
