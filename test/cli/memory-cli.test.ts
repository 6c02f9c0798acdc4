import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openCore, type OpenedCore } from '../../src/cli/open-core.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { startWorker, type Worker } from '../../src/jobs/worker.js';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { runCommand } from '../helpers/cli.js';
import { createTestEnv, DB_MODE, type TestEnv } from '../helpers/test-env.js';

const SLOW = { timeout: 180_000 };

/**
 * `aws embedder set|show|clear` and `aws memory backfill` run in-process (the built CLI), with a worker running in this
 * process (as `aws worker` or `aws serve` would) and the scripted embeddings server on loopback.
 */
describe(`embedder and memory backfill commands (${DB_MODE})`, SLOW, () => {
  let env: TestEnv;
  let llm: FakeLlm;
  let opened: OpenedCore;
  let worker: Worker | undefined;
  const run = (args: string[]) => runCommand([...args, '--tenant', 'acme'], { env });
  const sql = async <T extends Record<string, unknown>>(text: string, params: unknown[] = []) => (await opened.db.query<T>(text, params)).rows;

  beforeAll(async () => {
    llm = await startFakeLlm();
    env = await createTestEnv();
    // This process opens the database once, for its own queries and the worker, and on the embedded
    // database it hosts it for the commands (as `aws serve` would): opening it a second time in one
    // process would start a second host on the same directory.
    opened = await openCore(env.config(), silentLogger);
    expect((await runCommand(['migrate'], { env })).code).toBe(0);
    for (const [name, email] of [['acme', 'alice@acme.example'], ['beta', 'bob@beta.example']]) {
      expect((await runCommand(['tenant', 'seed', '--name', name, '--owner-email', email], { env })).code).toBe(0);
    }
    const add = await run(['provider', 'add', 'emb', '--kind', 'openai-compatible', '--base-url', `${llm.url}/v1`, '--model', 'fake-embed-32', '--json']);
    expect(add.code, add.stderr).toBe(0);
  });
  afterAll(async () => {
    await worker?.stop(2000).catch(() => {});
    await opened?.close();
    await env?.cleanup();
    await llm?.close();
  });

  it('embedder set refuses what cannot embed (exit 1, the reason), sets, shows and clears', async () => {
    const refused = await run(['embedder', 'set', '--provider', 'emb', '--model', 'gpt-4.1']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/Error: model: "gpt-4\.1" on provider "emb" could not embed a test text: provider "emb" answered 404/);
    expect(refused.stderr).toMatch(/Hint: Check the model id/);

    const none = await run(['embedder', 'show']);
    expect(none.code).toBe(0);
    expect(none.stdout).toMatch(/^no embedder: memory search runs on full text alone/);

    const set = await run(['embedder', 'set', '--provider', 'emb', '--model', 'fake-embed-32', '--json']);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ embedder: { provider: 'emb', model: 'fake-embed-32', dimensions: 32, updatedBy: 'system:cli' }, changed: true, backfill: null });

    const show = await run(['embedder', 'show', '--json']);
    expect(JSON.parse(show.stdout)).toMatchObject({ embedder: { model: 'fake-embed-32' }, memories: { embedded: 0, pending: 0 } });
    const human = await run(['embedder', 'show']);
    expect(human.stdout).toMatch(/^provider\s+emb$/m);
    expect(human.stdout).toMatch(/^dimensions\s+32$/m);

    expect(JSON.parse((await run(['embedder', 'clear', '--json'])).stdout)).toEqual({ cleared: true });
    expect(JSON.parse((await run(['embedder', 'show', '--json'])).stdout)).toEqual({ embedder: null });
    // The other tenant never had one.
    expect(JSON.parse((await runCommand(['embedder', 'show', '--tenant', 'beta', '--json'], { env })).stdout)).toEqual({ embedder: null });
  });

  it('memory backfill follows the job to the end (plain progress lines without a terminal), exits 1 when it fails', async () => {
    const noEmbedder = await run(['memory', 'backfill', '--json']);
    expect(noEmbedder.code).toBe(1);
    expect(JSON.parse(noEmbedder.stdout)).toMatchObject({ error: 'no_embedder' });

    expect((await run(['embedder', 'set', '--provider', 'emb', '--model', 'fake-embed-32'])).code).toBe(0);
    const [{ id: tenantId }] = await sql<{ id: string }>(`select id from tenants where slug = 'acme'`);
    const [{ id: userId }] = await sql<{ id: string }>(`select id from users where tenant_id = $1`, [tenantId]);
    await sql(`insert into memories (tenant_id, user_id, kind, content) select $1, $2, 'fact', 'cli memory ' || g from generate_series(1, 70) g`, [tenantId, userId]);

    worker = await startWorker(opened.core, opened.boss, silentLogger, { concurrency: 1 });

    const r = await run(['memory', 'backfill', '--limit', '100']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^embedding memories: queued, 0\/\? embedded$/m);
    expect(r.stderr).toMatch(/^embedding memories: completed, 70\/70 embedded$/m);
    expect(r.stderr).toMatch(/^done: 70 memories embedded, 0 still lacking a vector of the model$/m);
    expect(r.stdout).toBe('');
    const [{ n }] = await sql<{ n: number }>(`select count(*)::int as n from memories where tenant_id = $1 and embedding is not null`, [tenantId]);
    expect(n).toBe(70);

    // --json: one document, the finished job; nothing on stderr.
    const json = await run(['memory', 'backfill', '--json']);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout).job).toMatchObject({ kind: 'embed-memories', status: 'completed', payload: { limit: 500 }, result: { embedded: 0, remaining: 0 } });
    expect(json.stderr).toBe('');

    // A job that fails (its provider disabled meanwhile) makes the command fail.
    await sql(`insert into memories (tenant_id, user_id, kind, content) values ($1, $2, 'fact', 'one more')`, [tenantId, userId]);
    expect((await run(['provider', 'update', 'emb', '--disable'])).code).toBe(0);
    const failed = await run(['memory', 'backfill', '--json']);
    expect(failed.code).toBe(1);
    expect(JSON.parse(failed.stdout).job).toMatchObject({ status: 'failed', error: 'the embedder\'s provider "emb" is disabled' });
    const human = await run(['memory', 'backfill', '--limit', '3']);
    expect(human.code).toBe(1);
    expect(human.stderr).toMatch(/the backfill failed: the embedder's provider "emb" is disabled/);
    expect((await run(['provider', 'update', 'emb', '--enable'])).code).toBe(0);

    const detached = await run(['memory', 'backfill', '--detach', '--json']);
    expect(detached.code).toBe(0);
    expect(JSON.parse(detached.stdout).job).toMatchObject({ status: 'queued', payload: { limit: 500 } });
  });
});
