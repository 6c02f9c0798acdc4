import { describe, expect, it } from 'vitest';
import { checkBaseUrl, checkModelRef, checkModels, modelPrices, providerOrigin, publicProvider } from '../../src/core/providers/providers-fns.js';
import type { ProviderRow } from '../../src/core/providers/providers.repo.js';

const row = (over: Partial<ProviderRow> = {}): ProviderRow => ({
  id: 'p1',
  tenantId: 't1',
  name: 'local',
  kind: 'openai-compatible',
  baseUrl: 'http://llm.internal:8080/v1',
  apiKeySealed: 'sealed-key',
  models: [{ id: 'small' }, { id: 'large' }],
  enabled: true,
  createdAt: new Date(0),
  updatedAt: new Date(0),
  ...over,
});

describe('provider rules', () => {
  it('a key goes to the base URL\'s origin, else to the kind\'s default host', () => {
    expect(providerOrigin('openai-compatible', 'http://llm.internal:8080/v1')).toBe('http://llm.internal:8080');
    expect(providerOrigin('openai', null)).toBe('https://api.openai.com');
    expect(providerOrigin('anthropic', null)).toBe('https://api.anthropic.com');
    expect(providerOrigin('openai-compatible', null)).toBeNull();
  });

  it('a base URL is an absolute http(s) URL without credentials, stored without trailing slashes', () => {
    expect(checkBaseUrl('openai-compatible', 'https://llm.example/v1//')).toBe('https://llm.example/v1');
    expect(checkBaseUrl('openai', undefined)).toBeNull();
    expect(() => checkBaseUrl('openai-compatible', null)).toThrow(/baseUrl is required/);
    expect(() => checkBaseUrl('openai', 'llm.example/v1')).toThrow(/absolute http\(s\) URL/);
    expect(() => checkBaseUrl('openai', 'ftp://llm.example/')).toThrow(/http\(s\) URL/);
    expect(() => checkBaseUrl('openai', 'https://me:secret@llm.example/')).toThrow(/must not carry credentials/);
  });

  it('a provider lists each model once', () => {
    expect(() => checkModels([{ id: 'a' }, { id: 'b' }])).not.toThrow();
    expect(() => checkModels([{ id: 'a' }, { id: 'b' }, { id: 'a' }])).toThrow('model "a" is listed twice');
  });

  it('a model reference names a provider and one of its models', () => {
    const providers = [row()];
    expect(checkModelRef('local/large', providers)).toMatchObject({ provider: { name: 'local' }, modelId: 'large' });
    expect(() => checkModelRef('large', providers)).toThrow(/must be "<provider>\/<model id>"/);
    expect(() => checkModelRef('remote/large', providers)).toThrow('no provider "remote"');
    expect(() => checkModelRef('local/huge', providers)).toThrow('provider "local" lists no model "huge"');
  });

  it('the public view never holds the key, only whether there is one', () => {
    const shown = publicProvider(row());
    expect(shown).not.toHaveProperty('apiKeySealed');
    expect(JSON.stringify(shown)).not.toContain('sealed-key');
    expect(shown.hasApiKey).toBe(true);
    expect(publicProvider(row({ apiKeySealed: null })).hasApiKey).toBe(false);
  });
});

describe('modelPrices: what a model\'s calls are charged', () => {
  it('anthropic: unset cache prices follow Anthropic\'s rule (reads 0.1x, writes 1.25x, one-hour writes 2x the input price)', () => {
    expect(modelPrices('anthropic', { id: 'claude-sonnet', inputCostPerMTok: 3, outputCostPerMTok: 15 })).toEqual({
      inputPerMTok: 3, outputPerMTok: 15, cacheReadPerMTok: 0.3, cacheWritePerMTok: 3.75, cacheWriteLongPerMTok: 6,
    });
    // Written without floating-point noise (3 x 0.1 is not 0.3 in binary).
    expect(modelPrices('anthropic', { id: 'claude-opus', inputCostPerMTok: 15 }).cacheReadPerMTok).toBe(1.5);
  });

  it('openai and openai-compatible: unset cache prices are the input price (never below the bill, never zero by accident)', () => {
    for (const kind of ['openai', 'openai-compatible'] as const) {
      expect(modelPrices(kind, { id: 'm', inputCostPerMTok: 2, outputCostPerMTok: 8 })).toEqual({ inputPerMTok: 2, outputPerMTok: 8, cacheReadPerMTok: 2, cacheWritePerMTok: 2, cacheWriteLongPerMTok: 4 });
    }
  });

  it('prices the tenant gives win, zero included; a one-hour write costs the cache write price where that is higher than 2x input', () => {
    expect(modelPrices('openai', { id: 'gpt-4.1', inputCostPerMTok: 2, cacheReadCostPerMTok: 0.5 })).toMatchObject({ cacheReadPerMTok: 0.5, cacheWritePerMTok: 2 });
    expect(modelPrices('anthropic', { id: 'c', inputCostPerMTok: 3, cacheReadCostPerMTok: 0, cacheWriteCostPerMTok: 7 })).toMatchObject({ cacheReadPerMTok: 0, cacheWritePerMTok: 7, cacheWriteLongPerMTok: 7 });
    // No prices at all: nothing costs anything (a local model), as before.
    expect(modelPrices('anthropic', { id: 'free' })).toEqual({ inputPerMTok: 0, outputPerMTok: 0, cacheReadPerMTok: 0, cacheWritePerMTok: 0, cacheWriteLongPerMTok: 0 });
    expect(modelPrices('openai', undefined)).toEqual(modelPrices('openai', { id: 'x' }));
  });
});
