import { describe, expect, it } from 'vitest';
import { checkBaseUrl, checkModelRef, checkModels, providerOrigin, publicProvider } from '../../src/core/providers/providers-fns.js';
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
