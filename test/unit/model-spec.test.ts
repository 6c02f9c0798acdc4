import { describe, expect, it } from 'vitest';
import { parseCachePrice, parseModelSpec, withCachePrices } from '../../src/cli/provider-input.js';

describe('--model <id>[:context:output:inCost:outCost]', () => {
  it('reads an id alone, or with all four numbers', () => {
    expect(parseModelSpec('gpt-4.1-mini')).toEqual({ id: 'gpt-4.1-mini' });
    expect(parseModelSpec('gpt-4.1-mini:1047576:32768:0.4:1.6')).toEqual({ id: 'gpt-4.1-mini', contextLimit: 1047576, outputLimit: 32768, inputCostPerMTok: 0.4, outputCostPerMTok: 1.6 });
  });

  it('takes leading numbers only, and empty fields to skip one', () => {
    expect(parseModelSpec('m:200000')).toEqual({ id: 'm', contextLimit: 200000 });
    expect(parseModelSpec('m:200000:64000')).toEqual({ id: 'm', contextLimit: 200000, outputLimit: 64000 });
    expect(parseModelSpec('m:::3:15')).toEqual({ id: 'm', inputCostPerMTok: 3, outputCostPerMTok: 15 });
  });

  it('keeps ids with colons of their own whole', () => {
    expect(parseModelSpec('llama3.1:8b')).toEqual({ id: 'llama3.1:8b' });
    expect(parseModelSpec('qwen2.5-coder:7b:32768:4096:0:0')).toEqual({ id: 'qwen2.5-coder:7b', contextLimit: 32768, outputLimit: 4096, inputCostPerMTok: 0, outputCostPerMTok: 0 });
    expect(parseModelSpec('gemma:2::::')).toEqual({ id: 'gemma:2' });
  });

  it('refuses an empty id and limits that are not whole numbers', () => {
    expect(() => parseModelSpec('')).toThrow(/model id is empty/);
    expect(() => parseModelSpec(':1000')).toThrow(/model id is empty/);
    expect(() => parseModelSpec('m:12.5')).toThrow(/context limit must be a whole number/);
    expect(() => parseModelSpec('m:1000:0')).toThrow(/output limit must be a whole number/);
  });
});

describe('--cache-price <model id>=<read>[:<write>]', () => {
  it('reads both prices, or either alone; model ids keep their colons and equals signs', () => {
    expect(parseCachePrice('claude-sonnet-4-5=0.3:3.75')).toEqual({ id: 'claude-sonnet-4-5', cacheReadCostPerMTok: 0.3, cacheWriteCostPerMTok: 3.75 });
    expect(parseCachePrice('gpt-4.1=0.5')).toEqual({ id: 'gpt-4.1', cacheReadCostPerMTok: 0.5 });
    expect(parseCachePrice('gpt-4.1=0.5:')).toEqual({ id: 'gpt-4.1', cacheReadCostPerMTok: 0.5 });
    expect(parseCachePrice('m=:6')).toEqual({ id: 'm', cacheWriteCostPerMTok: 6 });
    expect(parseCachePrice('qwen2.5-coder:7b=0:0')).toEqual({ id: 'qwen2.5-coder:7b', cacheReadCostPerMTok: 0, cacheWriteCostPerMTok: 0 });
    expect(parseCachePrice('a=b=1')).toEqual({ id: 'a=b', cacheReadCostPerMTok: 1 });
  });

  it('refuses a spec without a model, without a price, or with prices that are not numbers', () => {
    expect(() => parseCachePrice('0.3:3.75')).toThrow(/name the model/);
    expect(() => parseCachePrice('=0.3')).toThrow(/name the model/);
    expect(() => parseCachePrice('m=')).toThrow(/give a cache read price, a cache write price, or both/);
    expect(() => parseCachePrice('m=:')).toThrow(/give a cache read price/);
    expect(() => parseCachePrice('m=cheap')).toThrow(/USD per million tokens/);
    expect(() => parseCachePrice('m=-1')).toThrow(/USD per million tokens/);
    expect(() => parseCachePrice('m=1:2:3')).toThrow(/USD per million tokens/);
  });

  it('sets the prices on the models named, leaving the rest of each model as it was; refuses a model not in the list', () => {
    const models = [{ id: 'a', inputCostPerMTok: 3, cacheReadCostPerMTok: 0.2 }, { id: 'b', contextLimit: 1000 }];
    expect(withCachePrices(models, ['a=:3.75', 'b=0.1'])).toEqual([
      { id: 'a', inputCostPerMTok: 3, cacheReadCostPerMTok: 0.2, cacheWriteCostPerMTok: 3.75 },
      { id: 'b', contextLimit: 1000, cacheReadCostPerMTok: 0.1 },
    ]);
    expect(withCachePrices(models, [])).toEqual(models);
    expect(() => withCachePrices(models, ['c=1'])).toThrow(/no model "c" \(its models: a, b\)/);
  });
});
