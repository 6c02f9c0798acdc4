import { describe, expect, it } from 'vitest';
import { testFailure, testSuccess } from '../../src/core/providers/provider-test-fns.js';

const KEY = 'sk-secret-0123456789';

describe('provider test outcomes', () => {
  it('a refusal is reported in the provider\'s own words, with its status, the key cut out', () => {
    expect(testFailure(`provider "oa" answered 401: Incorrect API key provided: ${KEY}`, 401, KEY)).toEqual({ ok: false, status: 401, message: 'Incorrect API key provided: [key]' });
    expect(testFailure('provider "oa" answered 429: Rate limit reached', 429, KEY)).toEqual({ ok: false, status: 429, message: 'Rate limit reached' });
  });

  it('an unreachable or silent provider has status null and the reason as the client gave it', () => {
    expect(testFailure('provider "oa" did not answer within 15 s', null, KEY)).toEqual({ ok: false, status: null, message: 'provider "oa" did not answer within 15 s' });
    expect(testFailure('provider "oa" cannot be reached: connect ECONNREFUSED 127.0.0.1:9', null, '')).toMatchObject({ ok: false, status: null });
  });

  it('a 2xx without text counts as working (a model that spent its few tokens thinking); other 2xx faults do not', () => {
    expect(testFailure('provider "oa" answered no text (finish reason: length)', 200, KEY)).toEqual({ ok: true, reply: '' });
    expect(testFailure('provider "oa" answered something that is not JSON', 200, KEY)).toEqual({ ok: false, status: 200, message: 'provider "oa" answered something that is not JSON' });
  });

  it('a reply is cut to 200 characters and never carries the key', () => {
    expect(testSuccess(`ok ${KEY}`, KEY)).toEqual({ ok: true, reply: 'ok [key]' });
    expect(testSuccess('x'.repeat(500), '')).toEqual({ ok: true, reply: 'x'.repeat(200) });
  });
});
