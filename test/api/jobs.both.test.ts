import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EMBED_MEMORIES_JOB } from '../../src/core/memories/memory-indexer.js';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { api, seedTenant, signToken, startTestApp, type TestApp } from '../helpers/app.js';
import { DB_MODE } from '../helpers/test-env.js';

/** The jobs API (POST/GET /v1/jobs, GET /v1/jobs/:id): validation, permission, tenancy, the queue job in the same transaction. */
describe(`jobs API (${DB_MODE})`, () => {
  let t: TestApp;
  let llm: FakeLlm;
  const tok: Record<string, string> = {};
  let acme: Awaited<ReturnType<typeof seedTenant>>;

  beforeAll(async () => {
    llm = await startFakeLlm();
    t = await startTestApp();
    acme = await seedTenant(t, 'acme', [
      { handle: 'mia', roles: ['member'] },
      { handle: 'vic', roles: ['viewer'] },
      { handle: 'ada', roles: ['admin'] },
    ]);
    const beta = await seedTenant(t, 'beta');
    tok.owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'] });
    tok.admin = await signToken(t, { sub: acme.ids.ada, tid: acme.tenantId, roles: ['admin'] });
    tok.member = await signToken(t, { sub: acme.ids.mia, tid: acme.tenantId, roles: ['member'] });
    tok.viewer = await signToken(t, { sub: acme.ids.vic, tid: acme.tenantId, roles: ['viewer'] });
    tok.beta = await signToken(t, { sub: beta.ids.owner, tid: beta.tenantId, roles: ['owner'] });
    for (const token of [tok.owner, tok.beta]) {
      const add = await api(t, 'POST', '/v1/admin/providers', { token, body: { name: 'emb', kind: 'openai-compatible', baseUrl: `${llm.url}/v1`, models: [{ id: 'fake-embed' }] } });
      expect(add.status, add.text).toBe(201);
    }
  });
  afterAll(async () => {
    await t?.close();
    await llm?.close();
  });

  const post = (token: string, body: unknown) => api(t, 'POST', '/v1/jobs', { token, body });

  it('answers 400 naming the field for unknown kinds and bad payloads, before anything else', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ kind: 'reindex-everything', payload: {} }, /^kind: unknown job kind "reindex-everything" \(known: embed-memories, index-sessions\)/],
      [{ kind: EMBED_MEMORIES_JOB, payload: {} }, /^payload\.limit: must be a whole number of at least 1/],
      [{ kind: EMBED_MEMORIES_JOB, payload: { limit: 0 } }, /^payload\.limit: /],
      [{ kind: EMBED_MEMORIES_JOB, payload: { limit: 2.5 } }, /^payload\.limit: /],
      [{ kind: EMBED_MEMORIES_JOB, payload: { limit: '500' } }, /^payload\.limit: /],
      [{ kind: EMBED_MEMORIES_JOB, payload: { limit: 5, everything: true } }, /^payload\.everything: unknown field/],
      [{ kind: EMBED_MEMORIES_JOB }, /^payload\.limit: /],
    ];
    for (const [body, message] of cases) {
      const r = await post(tok.owner, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.error).toBe('validation_failed');
      expect(r.json.message).toMatch(message);
      expect(r.json.details.field).toMatch(/^(kind|payload\.\w+)$/);
    }
    for (const body of [{ kind: EMBED_MEMORIES_JOB, payload: [] }, { kind: EMBED_MEMORIES_JOB, payload: 'x' }, { payload: { limit: 5 } }, { kind: EMBED_MEMORIES_JOB, payload: { limit: 5 }, extra: 1 }]) {
      const r = await post(tok.owner, body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.message).toMatch(/kind|payload|extra|additional/);
    }
    expect((await api(t, 'GET', '/v1/jobs', { token: tok.owner })).json.jobs).toEqual([]);
  });

  it('is admin.manage_providers (it spends the embedding budget); members and viewers get 403', async () => {
    for (const token of [tok.member, tok.viewer]) {
      expect((await post(token, { kind: EMBED_MEMORIES_JOB, payload: { limit: 5 } })).status).toBe(403);
      expect((await api(t, 'GET', '/v1/jobs', { token })).status).toBe(403);
    }
    expect((await api(t, 'GET', '/v1/jobs')).status).toBe(401);
  });

  it('409 without an embedder; 202 with the job once there is one, its queue job and audit entry in the same transaction', async () => {
    const none = await post(tok.owner, { kind: EMBED_MEMORIES_JOB, payload: { limit: 5 } });
    expect(none.status).toBe(409);
    expect(none.json.error).toBe('no_embedder');
    expect((await api(t, 'GET', '/v1/jobs', { token: tok.owner })).json.jobs).toEqual([]);
    expect((await t.opened.db.query(`select 1 from pgboss.job where name = $1`, [EMBED_MEMORIES_JOB])).rowCount).toBe(0);

    expect((await api(t, 'PUT', '/v1/admin/embedder', { token: tok.owner, body: { provider: 'emb', model: 'fake-embed' } })).status).toBe(200);
    const r = await post(tok.admin, { kind: EMBED_MEMORIES_JOB, payload: { limit: 500 } });
    expect(r.status, r.text).toBe(202);
    const job = r.json.job;
    expect(job).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      kind: EMBED_MEMORIES_JOB,
      status: 'queued',
      payload: { limit: 500 },
      result: null,
      error: null,
      createdBy: `user:${acme.ids.ada}`,
      createdAt: expect.any(String),
      startedAt: null,
      finishedAt: null,
    });
    const queued = (await t.opened.db.query(`select data, state from pgboss.job where name = $1`, [EMBED_MEMORIES_JOB])).rows;
    expect(queued).toEqual([{ data: { tenantId: acme.tenantId, jobId: job.id, modelKey: expect.stringMatching(/\/fake-embed\/64$/) }, state: 'created' }]);
    const audit = (await t.opened.db.query(`select actor, target, details from audit_log where tenant_id = $1 and action = 'job.create'`, [acme.tenantId])).rows;
    expect(audit).toEqual([{ actor: `user:${acme.ids.ada}`, target: `job:${job.id}`, details: expect.objectContaining({ kind: EMBED_MEMORIES_JOB, payload: { limit: 500 } }) }]);

    // One backfill at a time per workspace.
    const twice = await post(tok.owner, { kind: EMBED_MEMORIES_JOB, payload: { limit: 5 } });
    expect(twice.status).toBe(409);
    expect(twice.json.details).toEqual({ jobId: job.id });
  });

  it('lists the tenant\'s jobs newest first, filtered by status, limited; one job by id; another tenant\'s is 404', async () => {
    // Finish the queued one (as its worker would) so another may start.
    const [queued] = (await api(t, 'GET', '/v1/jobs?status=queued', { token: tok.owner })).json.jobs;
    await t.opened.db.query(`update tenant_jobs set status = 'completed', result = '{"embedded":0}', started_at = now(), finished_at = now() where id = $1`, [queued.id]);
    const second = (await post(tok.owner, { kind: EMBED_MEMORIES_JOB, payload: { limit: 7 } })).json.job;

    const all = (await api(t, 'GET', '/v1/jobs', { token: tok.owner })).json.jobs;
    expect(all.map((j: any) => j.id)).toEqual([second.id, queued.id]);
    expect((await api(t, 'GET', '/v1/jobs?status=completed', { token: tok.owner })).json.jobs).toMatchObject([{ id: queued.id, status: 'completed', result: { embedded: 0 } }]);
    expect((await api(t, 'GET', '/v1/jobs?status=queued', { token: tok.owner })).json.jobs).toMatchObject([{ id: second.id, payload: { limit: 7 } }]);
    expect((await api(t, 'GET', '/v1/jobs?limit=1', { token: tok.owner })).json.jobs).toHaveLength(1);
    const bad = await api(t, 'GET', '/v1/jobs?status=done', { token: tok.owner });
    expect(bad.status).toBe(400);
    expect(bad.json.message).toMatch(/^status: must be one of queued, running, completed, failed/);
    expect((await api(t, 'GET', '/v1/jobs?limit=1000', { token: tok.owner })).status).toBe(400);

    expect((await api(t, 'GET', `/v1/jobs/${second.id}`, { token: tok.owner })).json.job).toMatchObject({ id: second.id, status: 'queued' });
    expect((await api(t, 'GET', `/v1/jobs/${second.id}`, { token: tok.beta })).status).toBe(404);
    expect((await api(t, 'GET', `/v1/jobs/${crypto.randomUUID()}`, { token: tok.owner })).status).toBe(404);
    expect((await api(t, 'GET', '/v1/jobs/not-a-job', { token: tok.owner })).status).toBe(404);
    expect((await api(t, 'GET', '/v1/jobs', { token: tok.beta })).json.jobs).toEqual([]);
  });
});
