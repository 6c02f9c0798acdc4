import type http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEmbeddingClient, EmbeddingCallError, MAX_INPUT_CHARS } from '../../src/core/embeddings/embedding-client.js';
import type { ProviderRow } from '../../src/core/providers/providers.repo.js';
import { json, startScriptedServer, type ScriptedServer } from '../fixtures/scripted-server.js';

/** The embeddings call against a loopback server scripted per test: what is sent, and every way an answer can be wrong. */
describe('embedding client', () => {
  let s: ScriptedServer;
  beforeAll(async () => {
    s = await startScriptedServer();
  });
  afterAll(() => s.close());

  const provider = (over: Partial<ProviderRow> = {}): ProviderRow => ({
    id: 'p1',
    tenantId: 't1',
    name: 'emb',
    kind: 'openai-compatible',
    baseUrl: `${s.url}/v1/`,
    apiKeySealed: 'sealed:sk-real',
    models: [],
    enabled: true,
    createdAt: new Date(),
    updatedAt: new Date(),
    ...over,
  });
  const client = createEmbeddingClient({ openKey: (s) => s.replace(/^sealed:/, '') });
  const embed = (texts: string[], options: { timeoutMs?: number; dimensions?: number } = {}, p = provider()) => client.embed(p, 'm-embed', texts, { timeoutMs: options.timeoutMs ?? 5000, dimensions: options.dimensions });

  it('posts the batch to <baseUrl>/embeddings with the opened key, and returns vectors in input order with the usage', async () => {
    s.answer = (_body, _req, res) =>
      json(res, 200, { data: [{ index: 1, embedding: [0, 1] }, { index: 0, embedding: [1, 0] }], usage: { prompt_tokens: 7, total_tokens: 7 }, model: 'm-embed' });
    const long = 'x'.repeat(MAX_INPUT_CHARS + 50);
    const r = await embed(['first', long]);
    expect(r.vectors).toEqual([
      [1, 0],
      [0, 1],
    ]);
    expect(r.usage).toMatchObject({ input: 7, output: 0 });
    const req = s.seen.at(-1)!;
    expect(req.path).toBe('/v1/embeddings');
    expect(req.headers.authorization).toBe('Bearer sk-real');
    expect(req.body).toEqual({ model: 'm-embed', input: ['first', 'x'.repeat(MAX_INPUT_CHARS)], encoding_format: 'float' });
    // Without a key no Authorization header at all; blank texts go as one space.
    await embed([''], {}, provider({ apiKeySealed: null })).catch(() => {});
    expect(s.seen.at(-1)!.headers.authorization).toBeUndefined();
    expect(s.seen.at(-1)!.body.input).toEqual([' ']);
  });

  it('fails with the provider\'s status and reason, or says what is wrong with the answer', async () => {
    const cases: Array<[(res: http.ServerResponse) => void, RegExp, number | null]> = [
      [(res) => json(res, 401, { error: { message: 'Incorrect API key provided' } }), /answered 401: Incorrect API key provided/, 401],
      [(res) => res.writeHead(502).end('<html>  bad   gateway </html>'), /answered 502: <html> bad gateway <\/html>/, 502],
      [(res) => res.writeHead(200).end('not json'), /not JSON/, 200],
      [(res) => json(res, 200, { data: [{ index: 0, embedding: [1] }] }), /answered 1 embeddings for 2 texts/, 200],
      [(res) => json(res, 200, { data: [{ index: 0, embedding: 'AAAA' }, { index: 1, embedding: 'AAAA' }] }), /not a list of numbers/, 200],
      [(res) => json(res, 200, { data: [{ index: 0, embedding: [1, 2] }, { index: 1, embedding: [1] }] }), /answered a 1-dimensional vector where 2 dimensions were expected/, 200],
    ];
    for (const [reply, message, status] of cases) {
      s.answer = (_b, _r, res) => reply(res);
      const err = await embed(['a', 'b']).catch((e) => e);
      expect(err).toBeInstanceOf(EmbeddingCallError);
      expect(err.message).toMatch(message);
      expect(err.status).toBe(status);
    }
    s.answer = (_b, _r, res) => json(res, 200, { data: [{ embedding: [1, 2, 3] }] });
    await expect(embed(['a'], { dimensions: 4 })).rejects.toThrow(/3-dimensional vector where 4 dimensions were expected/);
  });

  it('bounds the wait, and names an unreachable provider; anthropic providers have no embeddings', async () => {
    s.answer = () => {}; // never answers
    await expect(embed(['a'], { timeoutMs: 300 })).rejects.toThrow(/provider "emb" did not answer within 0.3 s/);
    await expect(embed(['a'], {}, provider({ baseUrl: 'http://127.0.0.1:9/v1' }))).rejects.toThrow(/provider "emb" cannot be reached: .*ECONNREFUSED/);
    await expect(embed(['a'], {}, provider({ kind: 'anthropic' }))).rejects.toThrow(/anthropic providers have no \/embeddings endpoint/);
  });
});
