/**
 * Providers' names, kinds and model references as plain values, for the core to check without TypeBox
 * (which costs a command some 80 ms to load): providers.schemas.ts builds the API's schemas from them.
 */

/** Provider names are part of the runtime's provider id and of model references ("<name>/<model>"). */
export const PROVIDER_NAME = /^[a-z0-9][a-z0-9-]{0,39}$/;
export const PROVIDER_KINDS = ['openai-compatible', 'openai', 'anthropic'] as const;
export type ProviderKind = (typeof PROVIDER_KINDS)[number];

/** A model reference: "<provider name>/<model id>". */
export const MODEL_REF = /^([a-z0-9][a-z0-9-]{0,39})\/(.{1,200})$/;
