import { describe, expect, it } from 'vitest';
import { parseModelSpec } from '../../src/cli/provider-input.js';

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
