import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemCtx } from '../../src/kernel/context.js';
import { BACKFILL_RETRY_LIMIT, EMBED_BATCH, EMBED_MEMORIES_JOB, EMBED_MEMORIES_LOST_JOB, EMBED_MEMORY_JOB } from '../../src/core/memories/memory-indexer.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { startWorker } from '../../src/jobs/worker.js';
import { fakeEmbedding, startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

const KEY = 'sk-embeddings-secret-0123456789';
const ctx = systemCtx(silentLogger, { name: 'worker', channel: 'worker' });
const cosine = (a: number[], b: number[]) => a.reduce((s, x, i) => s + x * b[i], 0) / (Math.hypot(...a) * Math.hypot(...b));

/**
 * Embedders (PUT/GET/DELETE /v1/admin/embedder), the embedding calls (tenant key, usage) and the
 * embedding jobs (embed-memory after a write, the embed-memories backfill), against the scripted
 * OpenAI-compatible server's deterministic /v1/embeddings. Memories are written with SQL: the memories
 * API is not this suite's subject.
 */
describe(`embedders and embedding jobs (${DB_MODE})`, () => {
  let t: TestApp;
  let llm: FakeLlm;
  const tok: Record<string, string> = {};
  const tenants: Record<string, Awaited<ReturnType<typeof seedTenant>>> = {};

  beforeAll(async () => {
    llm = await startFakeLlm();
    t = await startTestApp();
    for (const slug of ['acme', 'beta', 'gamma', 'delta']) {
      tenants[slug] = await seedTenant(t, slug, slug === 'acme' ? [{ handle: 'mia', roles: ['member'] }] : []);
      tok[slug] = await signToken(t, { sub: tenants[slug].ids.owner, tid: tenants[slug].tenantId, roles: ['owner'] });
      const add = await api(t, 'POST', '/v1/admin/providers', {
        token: tok[slug],
        body: { name: 'emb', kind: 'openai-compatible', baseUrl: `${llm.url}/v1`, apiKey: KEY, models: [{ id: 'fake-embed-32', inputCostPerMTok: 100 }, { id: 'fake-model' }] },
      });
      expect(add.status, add.text).toBe(201);
    }
    tok.member = await signToken(t, { sub: tenants.acme.ids.mia, tid: tenants.acme.tenantId, roles: ['member'] });
  });
  afterAll(async () => {
    await t?.close();
    await llm?.close();
  });

  const db = () => t.opened.db;
  const put = (token: string, body: unknown) => api(t, 'PUT', '/v1/admin/embedder', { token, body });
  async function remember(slug: string, content: string): Promise<string> {
    const { rows } = await db().query<{ id: string }>(`insert into memories (tenant_id, user_id, kind, content) values ($1, $2, 'fact', $3) returning id`, [
      tenants[slug].tenantId,
      tenants[slug].ids.owner,
      content,
    ]);
    return rows[0].id;
  }
  const memory = async (id: string) =>
    (
      await db().query<{ model: string | null; dims: number | null; vector: string | null; embeddedAt: Date | null }>(
        `select embedding_model as model, vector_dims(embedding) as dims, embedding::text as vector, embedded_at as "embeddedAt" from memories where id = $1`,
        [id],
      )
    ).rows[0];
  /** Audit entries of an action, newest first, with their details (the API does not show details). */
  const audited = async (slug: string, action: string) =>
    (await db().query<{ target: string; details: any }>(`select target, details from audit_log where tenant_id = $1 and action = $2 order by ts desc`, [tenants[slug].tenantId, action])).rows;
  /** A worker serving every queue, for the length of fn; then its queues are let go (the app's pg-boss stays up). */
  async function withWorker<T>(fn: () => Promise<T>): Promise<T> {
    const worker = await startWorker(t.opened.core, t.opened.boss, silentLogger, { concurrency: 1 });
    try {
      return await fn();
    } finally {
      for (const q of worker.queues) await t.opened.boss.offWork(q);
    }
  }
  const job = async (slug: string, id: string) => (await api(t, 'GET', `/v1/jobs/${id}`, { token: tok[slug] })).json.job;
  async function untilFinished(slug: string, id: string, timeout = 40_000) {
    await expect.poll(async () => (await job(slug, id)).status, { timeout, interval: 200 }).toMatch(/^(completed|failed)$/);
    return job(slug, id);
  }

  it('is admin.manage_providers: a member may neither read nor set it', async () => {
    expect((await api(t, 'GET', '/v1/admin/embedder', { token: tok.member })).status).toBe(403);
    expect((await put(tok.member, { provider: 'emb', model: 'fake-embed-32' })).status).toBe(403);
    expect((await api(t, 'DELETE', '/v1/admin/embedder', { token: tok.member })).status).toBe(403);
    expect((await api(t, 'GET', '/v1/admin/embedder', { token: tok.acme })).json).toEqual({ embedder: null });
  });

  it('refuses, naming the field, what cannot embed: unknown, anthropic or disabled providers, a chat model, wrong dimensions', async () => {
    expect((await api(t, 'POST', '/v1/admin/providers', { token: tok.acme, body: { name: 'claude', kind: 'anthropic', apiKey: 'sk-ant', models: [{ id: 'claude-x' }] } })).status).toBe(201);
    expect((await api(t, 'POST', '/v1/admin/providers', { token: tok.acme, body: { name: 'off', kind: 'openai-compatible', baseUrl: `${llm.url}/v1`, models: [{ id: 'x' }], enabled: false } })).status).toBe(201);
    const cases: Array<[unknown, RegExp, string]> = [
      [{ provider: 'nope', model: 'fake-embed-32' }, /^provider: .*no provider "nope"/, 'provider'],
      [{ provider: 'claude', model: 'fake-embed-32' }, /^provider: anthropic providers have no .*\/embeddings/, 'provider'],
      [{ provider: 'off', model: 'fake-embed-32' }, /^provider: "off" is disabled/, 'provider'],
      [{ provider: 'emb', model: 'fake-model' }, /^model: "fake-model" on provider "emb" could not embed a test text: provider "emb" answered 404: The model `fake-model` does not exist/, 'model'],
      [{ provider: 'emb', model: 'fake-embed-32', dimensions: 1536 }, /^dimensions: "fake-embed-32" answers 32-dimensional vectors, not 1536/, 'dimensions'],
      [{ provider: 'emb', model: 'has space' }, /^model: /, 'model'],
    ];
    for (const [body, message, field] of cases) {
      const r = await put(tok.acme, body);
      expect(r.status, r.text).toBe(400);
      expect(r.json.message).toMatch(message);
      expect(r.json.details.field).toBe(field);
    }
    const schema = await put(tok.acme, { provider: 'emb' });
    expect(schema.status).toBe(400);
    expect(schema.json.message).toMatch(/model/);
    expect((await api(t, 'GET', '/v1/admin/embedder', { token: tok.acme })).json).toEqual({ embedder: null });
  });

  it('sets the embedder: probes with the tenant key, learns the dimensions, audits, records usage', async () => {
    const before = llm.embeddings.length;
    const usageBefore = (await db().query(`select count(*)::int as n from usage_records where tenant_id = $1`, [tenants.acme.tenantId])).rows[0].n;
    const r = await put(tok.acme, { provider: 'emb', model: 'fake-embed-32' });
    expect(r.status, r.text).toBe(200);
    const providerId = (await db().query(`select id from providers where tenant_id = $1 and name = 'emb'`, [tenants.acme.tenantId])).rows[0].id;
    const modelKey = `${providerId}/fake-embed-32/32`;
    expect(r.json).toMatchObject({ embedder: { provider: 'emb', model: 'fake-embed-32', dimensions: 32, modelKey }, changed: true, pending: 0, backfill: null });
    // One probe, with the tenant's real key (the key never leaves the service otherwise).
    const probe = llm.embeddings.slice(before);
    expect(probe).toHaveLength(1);
    expect(probe[0]).toMatchObject({ model: 'fake-embed-32', authorization: `Bearer ${KEY}`, status: 200 });
    expect(r.text).not.toContain(KEY);


    const [audit] = await audited('acme', 'embedder.set');
    expect(audit).toMatchObject({ target: `tenant:${tenants.acme.tenantId}`, details: { provider: 'emb', model: 'fake-embed-32', dimensions: 32, modelKey, previous: null } });
    expect(JSON.stringify(audit)).not.toContain(KEY);

    // Every embedding call is spending: the probe is recorded like a model call.
    const usage = (
      await db().query(`select model, provider, tokens_input::int as input, cost_usd::float as cost, channel, user_id as "userId" from usage_records where tenant_id = $1 order by created_at desc`, [
        tenants.acme.tenantId,
      ])
    ).rows;
    expect(usage).toHaveLength(usageBefore + 1);
    expect(usage[0]).toMatchObject({ model: 'fake-embed-32', provider: 'emb', channel: 'embeddings', userId: tenants.acme.ids.owner });
    expect(usage[0].input).toBeGreaterThan(0);
    expect(usage[0].cost).toBeCloseTo((usage[0].input * 100) / 1e6, 8);

    const got = await api(t, 'GET', '/v1/admin/embedder', { token: tok.acme });
    expect(got.json).toMatchObject({ embedder: { provider: 'emb', model: 'fake-embed-32', dimensions: 32, modelKey, updatedBy: `user:${tenants.acme.ids.owner}` }, memories: { embedded: 0, pending: 0 } });
    // The same model again: nothing changes, no index to create.
    expect((await put(tok.acme, { provider: 'emb', model: 'fake-embed-32', dimensions: 32 })).json).toMatchObject({ changed: false, backfill: null });
  });

  it('a memory written before the embedder lacks an embedding until the backfill; one written after is embedded by its job', async () => {
    const early = await remember('beta', 'The deploy key lives in the vault under ops/deploy');
    expect((await put(tok.beta, { provider: 'emb', model: 'fake-embed-32' })).json).toMatchObject({ pending: 1, backfill: null });
    expect(await memory(early)).toMatchObject({ model: null, vector: null });
    expect((await api(t, 'GET', '/v1/admin/embedder', { token: tok.beta })).json.memories).toEqual({ embedded: 0, pending: 1 });

    // The memories service queues the embedding in the transaction writing the memory.
    const { core } = t.opened;
    const late = await db().transaction(async (tx) => {
      const { rows } = await tx.query<{ id: string }>(`insert into memories (tenant_id, user_id, kind, content) values ($1, $2, 'preference', 'Prefers tabs over spaces') returning id`, [
        tenants.beta.tenantId,
        tenants.beta.ids.owner,
      ]);
      expect(await core.memoryIndexer.queueMemoryEmbedding(tx, tenants.beta.tenantId, rows[0].id)).toBe(true);
      return rows[0].id;
    });
    const queued = (await db().query(`select data from pgboss.job where name = $1 and data->>'memoryId' = $2`, [EMBED_MEMORY_JOB, late])).rows;
    expect(queued).toEqual([{ data: { tenantId: tenants.beta.tenantId, memoryId: late } }]);
    await core.jobHandlers[EMBED_MEMORY_JOB](ctx, queued[0].data, { id: 'j1', name: EMBED_MEMORY_JOB, retryCount: 0 });
    const m = await memory(late);
    expect(m).toMatchObject({ dims: 32 });
    expect(m.model).toMatch(/\/fake-embed-32\/32$/);
    expect(cosine(JSON.parse(m.vector!), fakeEmbedding('Prefers tabs over spaces', 32))).toBeCloseTo(1, 5);
    // Run again (a redelivered job): no second provider call.
    const calls = llm.embeddings.length;
    await core.jobHandlers[EMBED_MEMORY_JOB](ctx, queued[0].data, { id: 'j1', name: EMBED_MEMORY_JOB, retryCount: 1 });
    expect(llm.embeddings.length).toBe(calls);
    expect(await memory(early)).toMatchObject({ model: null, vector: null });

    // The backfill, run by a worker, embeds the early one.
    await withWorker(async () => {
      const post = await api(t, 'POST', '/v1/jobs', { token: tok.beta, body: { kind: EMBED_MEMORIES_JOB, payload: { limit: 500 } } });
      expect(post.status, post.text).toBe(202);
      const done = await untilFinished('beta', post.json.job.id);
      expect(done).toMatchObject({ status: 'completed', error: null, result: { total: 1, embedded: 1, remaining: 0, batches: 1 } });
      expect(done.startedAt).not.toBeNull();
      expect(done.finishedAt).not.toBeNull();
    });
    expect(await memory(early)).toMatchObject({ dims: 32 });
    expect((await api(t, 'GET', '/v1/admin/embedder', { token: tok.beta })).json.memories).toEqual({ embedded: 2, pending: 0 });
  });

  it('a backfill interrupted midway (the provider fails after the first batch, the job is retried) embeds every memory exactly once', async () => {
    const n = 150;
    const contents = Array.from({ length: n }, (_, i) => `memory number ${i} about topic ${i % 7}`);
    for (const c of contents) await remember('gamma', c);
    expect((await put(tok.gamma, { provider: 'emb', model: 'fake-embed-32' })).json.pending).toBe(n);
    const start = llm.embeddings.length;
    // The second batch fails once (a provider outage between two batches).
    let failed = 0;
    llm.faultEmbeddings((call) => (call.n === start + 2 && failed++ === 0 ? 503 : null));
    const done = await withWorker(async () => {
      const post = await api(t, 'POST', '/v1/jobs', { token: tok.gamma, body: { kind: EMBED_MEMORIES_JOB, payload: { limit: 500 } } });
      expect(post.status, post.text).toBe(202);
      return untilFinished('gamma', post.json.job.id, 50_000);
    }).finally(() => llm.faultEmbeddings(null));
    expect(failed).toBe(1);
    expect(done).toMatchObject({ status: 'completed', error: null, result: { total: n, embedded: n, remaining: 0, batches: Math.ceil(n / EMBED_BATCH) } });
    const calls = llm.embeddings.slice(start);
    expect(calls.map((c) => c.status)).toEqual([200, 503, 200, 200]);
    const answered = calls.filter((c) => c.status === 200).flatMap((c) => c.input);
    expect(answered).toHaveLength(n);
    expect(new Set(answered)).toEqual(new Set(contents));
    // The failed batch was asked again, and nothing of the first batch was.
    expect(calls[2].input).toEqual(calls[1].input);
    const rows = (await db().query(`select count(*)::int as n from memories where tenant_id = $1 and embedding is not null and vector_dims(embedding) = 32`, [tenants.gamma.tenantId])).rows;
    expect(rows[0].n).toBe(n);
    const spent = (await db().query(`select count(*)::int as n from usage_records where tenant_id = $1 and channel = 'embeddings'`, [tenants.gamma.tenantId])).rows[0].n;
    expect(spent).toBe(1 + 3); // the probe and the three answered batches

    // Each stored vector has its binary code (the search short-lists by them).
    const codes = (await db().query(`select count(*)::int as n from memories where tenant_id = $1 and length(embedding_bits) = 32`, [tenants.gamma.tenantId])).rows[0].n;
    expect(codes).toBe(n);
  });

  it('a worker killed after a batch loses nothing: the retry resumes with the budget left; the last failed attempt fails the job', async () => {
    const { core } = t.opened;
    for (let i = 0; i < 100; i++) await remember('delta', `delta note ${i}`);
    await put(tok.delta, { provider: 'emb', model: 'fake-embed-32' });
    const post = await api(t, 'POST', '/v1/jobs', { token: tok.delta, body: { kind: EMBED_MEMORIES_JOB, payload: { limit: 90 } } });
    const [queued] = (await db().query(`select data from pgboss.job where name = $1 and data->>'jobId' = $2`, [EMBED_MEMORIES_JOB, post.json.job.id])).rows;
    expect(queued.data).toMatchObject({ tenantId: tenants.delta.tenantId, jobId: post.json.job.id, modelKey: expect.stringMatching(/\/fake-embed-32\/32$/) });
    const start = llm.embeddings.length;
    // The first attempt dies after its first batch (here: the provider fails the second).
    llm.faultEmbeddings((call) => (call.n > start + 1 ? 500 : null));
    await expect(core.jobHandlers[EMBED_MEMORIES_JOB](ctx, queued.data, { id: 'x', name: EMBED_MEMORIES_JOB, retryCount: 0 })).rejects.toThrow(/answered 500/);
    const midway = await job('delta', post.json.job.id);
    expect(midway).toMatchObject({ status: 'running', result: { total: 90, embedded: EMBED_BATCH, batches: 1 }, error: expect.stringMatching(/^attempt 1 failed, retrying: provider "emb" answered 500/) });
    llm.faultEmbeddings(null);
    await core.jobHandlers[EMBED_MEMORIES_JOB](ctx, queued.data, { id: 'x', name: EMBED_MEMORIES_JOB, retryCount: 1 });
    const done = await job('delta', post.json.job.id);
    expect(done).toMatchObject({ status: 'completed', error: null, result: { total: 90, embedded: 90, remaining: 10, batches: 2 } });
    const answered = llm.embeddings.slice(start).filter((c) => c.status === 200);
    expect(answered.map((c) => c.input.length)).toEqual([EMBED_BATCH, 90 - EMBED_BATCH]);
    // A redelivery of the finished job does nothing.
    await core.jobHandlers[EMBED_MEMORIES_JOB](ctx, queued.data, { id: 'x', name: EMBED_MEMORIES_JOB, retryCount: 2 });
    expect(llm.embeddings.length).toBe(start + 3);

    // The last attempt failing fails the job, with the reason.
    const again = await api(t, 'POST', '/v1/jobs', { token: tok.delta, body: { kind: EMBED_MEMORIES_JOB, payload: { limit: 5 } } });
    const [data] = (await db().query(`select data from pgboss.job where name = $1 and data->>'jobId' = $2`, [EMBED_MEMORIES_JOB, again.json.job.id])).rows.map((r) => r.data);
    llm.faultEmbeddings(() => 503);
    await expect(core.jobHandlers[EMBED_MEMORIES_JOB](ctx, data, { id: 'y', name: EMBED_MEMORIES_JOB, retryCount: BACKFILL_RETRY_LIMIT })).rejects.toThrow();
    llm.faultEmbeddings(null);
    const failed = await job('delta', again.json.job.id);
    expect(failed).toMatchObject({ status: 'failed', result: { embedded: 0, total: 5 } });
    expect(failed.error).toMatch(/answered 503.*\(after 4 attempts\)/);
    expect(failed.finishedAt).not.toBeNull();

    // A job that failed for good lands in the dead-letter queue, whose handler marks a row that still
    // says it runs (the worker of its last attempt was killed before it could) as failed.
    const lost = await api(t, 'POST', '/v1/jobs', { token: tok.delta, body: { kind: EMBED_MEMORIES_JOB, payload: { limit: 5 } } });
    const [row] = (await db().query(`select data, dead_letter as "deadLetter" from pgboss.job where name = $1 and data->>'jobId' = $2`, [EMBED_MEMORIES_JOB, lost.json.job.id])).rows;
    expect(row.deadLetter).toBe(EMBED_MEMORIES_LOST_JOB);
    await db().query(`update tenant_jobs set status = 'running', result = '{"embedded": 3, "total": 5}' where id = $1`, [lost.json.job.id]);
    await core.jobHandlers[EMBED_MEMORIES_LOST_JOB](ctx, row.data, { id: 'z', name: EMBED_MEMORIES_LOST_JOB });
    expect(await job('delta', lost.json.job.id)).toMatchObject({
      status: 'failed',
      result: { embedded: 3, total: 5 },
      error: 'the backfill stopped before it finished: its last attempt lost its worker; the 3 memories it embedded stay embedded, start it again to resume',
    });
    // A finished job is left as it is.
    await core.jobHandlers[EMBED_MEMORIES_LOST_JOB](ctx, queued.data, { id: 'z', name: EMBED_MEMORIES_LOST_JOB });
    expect((await job('delta', post.json.job.id)).status).toBe('completed');
  });

  it('changing the model queues a re-embedding backfill in the same transaction; a backfill queued for the old model stops', async () => {
    const { core } = t.opened;
    // A backfill queued for the current model, not yet run.
    const old = await api(t, 'POST', '/v1/jobs', { token: tok.beta, body: { kind: EMBED_MEMORIES_JOB, payload: { limit: 10 } } });
    expect(old.status, old.text).toBe(202);
    const r = await put(tok.beta, { provider: 'emb', model: 'fake-embed-16' });
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ changed: true, pending: 2, backfill: { kind: EMBED_MEMORIES_JOB, status: 'queued', payload: { limit: 2 } } });
    const newKey = r.json.embedder.modelKey as string;
    expect(newKey).toMatch(/\/fake-embed-16\/16$/);
    const [audit] = await audited('beta', 'embedder.set');
    expect(audit.details).toMatchObject({ modelKey: newKey, previous: expect.stringMatching(/\/fake-embed-32\/32$/), backfillJobId: r.json.backfill.id });
    expect((await audited('beta', 'job.create')).map((a) => a.target)).toContain(`job:${r.json.backfill.id}`);

    const dataOf = async (id: string) => (await db().query(`select data from pgboss.job where name = $1 and data->>'jobId' = $2`, [EMBED_MEMORIES_JOB, id])).rows[0].data;
    const calls = llm.embeddings.length;
    await core.jobHandlers[EMBED_MEMORIES_JOB](ctx, await dataOf(old.json.job.id), { id: 'o', name: EMBED_MEMORIES_JOB, retryCount: 0 });
    expect(await job('beta', old.json.job.id)).toMatchObject({ status: 'completed', result: { superseded: true, embedded: 0 } });
    expect(llm.embeddings.length).toBe(calls);

    await core.jobHandlers[EMBED_MEMORIES_JOB](ctx, await dataOf(r.json.backfill.id), { id: 'n', name: EMBED_MEMORIES_JOB, retryCount: 0 });
    expect(await job('beta', r.json.backfill.id)).toMatchObject({ status: 'completed', result: { modelKey: newKey, embedded: 2, remaining: 0 } });
    const rows = (await db().query(`select embedding_model as model, vector_dims(embedding) as dims from memories where tenant_id = $1`, [tenants.beta.tenantId])).rows;
    expect(rows).toEqual([
      { model: newKey, dims: 16 },
      { model: newKey, dims: 16 },
    ]);
  });

  it('embedQuery: the text\'s vector in the tenant\'s model (cached), null without an embedder; clearing keeps the vectors', async () => {
    const { core } = t.opened;
    const q = await core.embeddings.embedQuery(tenants.acme.tenantId, 'where is the deploy key kept');
    expect(q!.modelKey).toMatch(/\/fake-embed-32\/32$/);
    expect(q!.vector).toHaveLength(32);
    const near = fakeEmbedding('the deploy key is kept in the vault', 32);
    const far = fakeEmbedding('prefers green tea in the afternoon', 32);
    expect(cosine(q!.vector, near)).toBeGreaterThan(cosine(q!.vector, far));
    const calls = llm.embeddings.length;
    expect(await core.embeddings.embedQuery(tenants.acme.tenantId, 'where is the deploy key kept')).toEqual(q);
    expect(llm.embeddings.length).toBe(calls);

    llm.faultEmbeddings(() => 502);
    await expect(core.embeddings.embedQuery(tenants.acme.tenantId, 'another text')).rejects.toMatchObject({ status: 502, message: expect.stringMatching(/embedding the search text failed/) });
    llm.faultEmbeddings(null);

    const before = (await db().query(`select count(*)::int as n from memories where tenant_id = $1 and embedding is not null`, [tenants.beta.tenantId])).rows[0].n;
    expect((await api(t, 'DELETE', '/v1/admin/embedder', { token: tok.beta })).status).toBe(204);
    expect((await api(t, 'DELETE', '/v1/admin/embedder', { token: tok.beta })).status).toBe(204);
    expect((await api(t, 'GET', '/v1/admin/embedder', { token: tok.beta })).json).toEqual({ embedder: null });
    expect((await db().query(`select count(*)::int as n from memories where tenant_id = $1 and embedding is not null`, [tenants.beta.tenantId])).rows[0].n).toBe(before);
    expect(await core.embeddings.embedQuery(tenants.beta.tenantId, 'anything')).toBeNull();
    expect(await audited('beta', 'embedder.clear')).toMatchObject([{ details: { modelKey: expect.stringMatching(/\/fake-embed-16\/16$/) } }]);
    // Without an embedder nothing is queued for new memories, and a backfill cannot start.
    await db().transaction(async (tx) => expect(await core.memoryIndexer.queueMemoryEmbedding(tx, tenants.beta.tenantId, crypto.randomUUID())).toBe(false));
    const post = await api(t, 'POST', '/v1/jobs', { token: tok.beta, body: { kind: EMBED_MEMORIES_JOB, payload: { limit: 5 } } });
    expect(post.status).toBe(409);
    expect(post.json).toMatchObject({ error: 'no_embedder', hint: expect.stringContaining('embedder set') });
  });

  it('through the memories API: a new memory is embedded by its job and `q` answers hybrid; a memory not embedded yet is still found by its words', async () => {
    const eps = await seedTenant(t, 'eps', [{ handle: 'ema', roles: ['member'] }]);
    const owner = await signToken(t, { sub: eps.ids.owner, tid: eps.tenantId, roles: ['owner'] });
    const ema = await signToken(t, { sub: eps.ids.ema, tid: eps.tenantId, roles: ['member'] });
    expect((await api(t, 'POST', '/v1/admin/providers', { token: owner, body: { name: 'emb', kind: 'openai-compatible', baseUrl: `${llm.url}/v1`, apiKey: KEY, models: [{ id: 'fake-embed-32' }] } })).status).toBe(201);
    const write = (content: string) => api(t, 'POST', '/v1/memories', { token: ema, body: { kind: 'fact', content } });
    const search = (q: string) => api(t, 'GET', `/v1/memories?q=${encodeURIComponent(q)}`, { token: ema });

    const before = (await write('The staging database listens on port 6543')).json;
    expect((await search('staging database')).json).toMatchObject({ searchMode: 'fulltext', memories: [{ id: before.id }] });

    expect((await put(owner, { provider: 'emb', model: 'fake-embed-32' })).status).toBe(200);
    const after = (await write('Deploys go out every Tuesday afternoon')).json;
    await withWorker(async () => {
      await expect.poll(async () => (await memory(after.id)).dims, { timeout: 20_000, interval: 100 }).toBe(32);
    });
    expect((await memory(before.id)).vector).toBeNull();

    const hybrid = await search('when do deploys go out');
    expect(hybrid.status).toBe(200);
    expect(hybrid.json.searchMode).toBe('hybrid');
    expect(hybrid.json.memories[0]).toMatchObject({ id: after.id, embedded: true });
    const words = await search('staging database');
    expect(words.json.searchMode).toBe('hybrid');
    expect(words.json.memories.map((m: { id: string }) => m.id)).toContain(before.id);
  });

  it('charges a search\'s embedding to the person searching, a memory\'s to its author, and makes none once their monthly limit is spent', async () => {
    const zed = await seedTenant(t, 'zed', [{ handle: 'zoe', roles: [] }]);
    const owner = await signToken(t, { sub: zed.ids.owner, tid: zed.tenantId, roles: ['owner'] });
    expect((await api(t, 'POST', '/v1/admin/providers', { token: owner, body: { name: 'emb', kind: 'openai-compatible', baseUrl: `${llm.url}/v1`, apiKey: KEY, models: [{ id: 'fake-embed-32', inputCostPerMTok: 100 }] } })).status).toBe(201);
    expect((await put(owner, { provider: 'emb', model: 'fake-embed-32' })).status).toBe(200);
    const role = await api(t, 'POST', '/v1/admin/roles', { token: owner, body: { name: 'capped', permissions: { memory: { read_own: true, write: true }, cost: { monthly_limit_usd: 0.01 } } } });
    expect(role.status, role.text).toBe(201);
    expect((await api(t, 'POST', `/v1/admin/users/${zed.ids.zoe}/roles`, { token: owner, body: { roleId: role.json.role.id } })).status).toBe(200);
    const zoe = await signToken(t, { sub: zed.ids.zoe, tid: zed.tenantId, roles: ['capped'] });
    const written = (await api(t, 'POST', '/v1/memories', { token: zoe, body: { kind: 'fact', content: 'The release train leaves on Thursdays' } })).json;
    await withWorker(async () => {
      await expect.poll(async () => (await memory(written.id)).dims, { timeout: 20_000, interval: 100 }).toBe(32);
    });
    const charged = async () =>
      (await db().query<{ userId: string | null; n: number }>(`select user_id as "userId", count(*)::int as n from usage_records where tenant_id = $1 and channel = 'embeddings' group by 1 order by 1`, [zed.tenantId])).rows;
    const calls = () => llm.embeddings.filter((c) => c.input.some((x) => /release train|when does the train/.test(x))).length;
    const search = await api(t, 'GET', `/v1/memories?q=${encodeURIComponent('when does the train leave')}`, { token: zoe });
    expect(search.json.searchMode).toBe('hybrid');
    // The memory's embedding and the search's, both Zoe's (none under "unknown"); the owner's probe is the owner's.
    await expect.poll(charged).toEqual(expect.arrayContaining([{ userId: zed.ids.zoe, n: 2 }]));
    expect((await charged()).some((r) => r.userId === null)).toBe(false);
    // Spent: her searches run on words alone, and the provider is not called for them.
    await t.opened.core.usage.record(db(), { tenantId: zed.tenantId, userId: zed.ids.zoe, sessionId: null, model: 'm', provider: 'p', tokens: { input: 0, output: 0, reasoning: 0, cacheRead: 0, cacheWrite: 0 }, costUsd: 0.01, channel: 'web' });
    const before = calls();
    const spent = await api(t, 'GET', `/v1/memories?q=${encodeURIComponent('when does the train depart')}`, { token: zoe });
    expect(spent.status).toBe(200);
    expect(spent.json.searchMode).toBe('fulltext');
    expect(calls()).toBe(before);
  });
});
