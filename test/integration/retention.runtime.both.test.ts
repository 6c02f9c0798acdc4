import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { RETENTION_JOB } from '../../src/core/retention/retention.service.js';
import { api } from '../helpers/app.js';
import { agentTurn, applyScriptedProvider, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

const DAY = 86_400_000;

/**
 * Retention on the real database (both modes) with real runtimes: a session's transcript lives in its
 * owner's opencode store (SQLite under the runtime's home), which is read here directly to see it gone.
 */
describe(`retention (${DB_MODE})`, { timeout: 240_000 }, () => {
  let r: RuntimeApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;
  let shiftMs = 0;
  const clock = { now: () => new Date(Date.now() + shiftMs) };
  const db = () => r.t.opened.db;
  const ctx = () => systemCtx(silentLogger, { tenantId: people.tenantId, channel: 'cli' });
  let oldSession = '';
  let recentSession = '';
  let runningSession = '';
  let oldUpstream = '';
  let recentUpstream = '';
  const storeOf = (userId: string) => join(r.t.opened.core.config.dataDir, 'runtimes', userId, 'home', '.local', 'share', 'opencode', 'opencode.db');
  /** What the member's runtime holds of a runtime session: its row and its messages. */
  function inStore(upstreamId: string): { sessions: number; messages: number } {
    const store = new DatabaseSync(storeOf(people.ids.mia), { readOnly: true });
    try {
      const n = (sql: string) => (store.prepare(sql).get(upstreamId) as { n: number }).n;
      return { sessions: n('select count(*) as n from session where id = ?'), messages: n('select count(*) as n from message where session_id = ?') };
    } finally {
      store.close();
    }
  }
  const count = async (sql: string, args: unknown[]) => (await db().query<{ n: number }>(sql, args)).rows[0].n;

  beforeAll(async () => {
    r = await startRuntimeApp({ clock });
    people = await seedPeople(r.t, 'keep');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
    oldSession = (await agentTurn(r, people.tokens.member, [{ text: 'an old answer' }], { title: 'old work' })).sessionId;
    recentSession = (await agentTurn(r, people.tokens.member, [{ text: 'a recent answer' }], { title: 'recent work' })).sessionId;
    runningSession = (await api(r.t, 'POST', '/v1/sessions', { token: people.tokens.member, body: { title: 'running' } })).json.sessionId;
    const up = async (id: string) => (await db().query<{ u: string }>(`select upstream_id as u from agent_sessions where id = $1`, [id])).rows[0].u;
    oldUpstream = await up(oldSession);
    recentUpstream = await up(recentSession);
    const { tenantId } = people;
    // Age: the old session's last activity (and its turn) 100 days ago; the running one as old, with a turn in flight.
    await db().query(`update agent_sessions set updated_at = now() - interval '100 days' where id = any($1::uuid[])`, [[oldSession, runningSession]]);
    await db().query(`update agent_turns set created_at = now() - interval '100 days', sent_at = now() - interval '100 days' where session_id = $1`, [oldSession]);
    await db().query(
      `insert into agent_turns (tenant_id, session_id, user_id, message_id, parts, status, created_at, sent_at) values ($1, $2, $3, 'msg_running_retention', '[]', 'sent', now() - interval '100 days', now() - interval '100 days')`,
      [tenantId, runningSession, people.ids.mia],
    );
    for (const days of [200, 200, 10]) {
      await db().query(`insert into usage_records (tenant_id, user_id, model, cost_usd, created_at) values ($1, $2, 'scripted/fake-model', 0.5, now() - make_interval(days => $3::int))`, [tenantId, people.ids.mia, days]);
    }
    for (const [i, days] of [40, 5].entries()) {
      await db().query(
        `insert into trajectories (tenant_id, user_id, session_id, message_id, request, answer, tools, tool_grams, words, outcome, created_at)
         values ($1, $2, $3, $4, 'do it', 'done', '{}', '{}', '{}', 'success', now() - make_interval(days => $5::int))`,
        [tenantId, people.ids.mia, recentSession, `msg_retention_traj_${i}`, days],
      );
    }
    for (const days of [800, 800, 800, 100]) {
      await db().query(`insert into audit_log (tenant_id, actor, action, target, ts) values ($1, 'system:test', 'test.old', 'x', now() - make_interval(days => $2::int))`, [tenantId, days]);
    }
  }, 240_000);

  afterAll(async () => {
    await r?.close();
  });

  it('refuses an audit period under the floor, naming the field and the floor, and keeps forever by default', async () => {
    const before = await api(r.t, 'GET', '/v1/admin/retention', { token: people.tokens.owner });
    expect(before.json).toEqual({ retention: { sessions: null, usage: null, trajectories: null, audit: null }, auditFloorDays: 365 });
    const low = await api(r.t, 'PUT', '/v1/admin/retention', { token: people.tokens.owner, body: { audit: 30 } });
    expect(low.status).toBe(400);
    expect(low.json.message).toMatch(/^audit: 30 days .*365 days/);
    expect(low.json.details).toMatchObject({ field: 'audit', floorDays: 365 });
    const bad = await api(r.t, 'PUT', '/v1/admin/retention', { token: people.tokens.owner, body: { sessions: 0 } });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('sessions');
    expect((await api(r.t, 'PUT', '/v1/admin/retention', { token: people.tokens.member, body: { sessions: 90 } })).status).toBe(403);
  });

  it('sets the periods (audited), and a dry run counts what would go and removes nothing', async () => {
    const set = await api(r.t, 'PUT', '/v1/admin/retention', { token: people.tokens.owner, body: { sessions: 90, usage: 180, trajectories: 30, audit: 730 } });
    expect(set.status).toBe(200);
    expect(set.json.retention).toEqual({ sessions: 90, usage: 180, trajectories: 30, audit: 730 });
    expect((await api(r.t, 'GET', '/v1/admin/retention', { token: people.tokens.owner })).json.retention).toEqual({ sessions: 90, usage: 180, trajectories: 30, audit: 730 });
    expect(await count(`select count(*)::int as n from audit_log where tenant_id = $1 and action = 'retention.update'`, [people.tenantId])).toBe(1);

    const dry = await r.t.opened.core.retention.run(ctx(), { dryRun: true });
    expect(dry.removed).toEqual({ sessions: 1, usage: 2, trajectories: 1, audit: 3 });
    expect(await count(`select count(*)::int as n from agent_sessions where id = $1`, [oldSession])).toBe(1);
    expect(inStore(oldUpstream).sessions).toBe(1);
    expect(await count(`select count(*)::int as n from usage_records where tenant_id = $1 and created_at < now() - interval '100 days'`, [people.tenantId])).toBe(2);
    expect(await count(`select count(*)::int as n from audit_log where tenant_id = $1 and action = 'test.old'`, [people.tenantId])).toBe(4);
    expect(await count(`select count(*)::int as n from audit_log where tenant_id = $1 and action = 'retention.run'`, [people.tenantId])).toBe(0);
  });

  it('removes what is older than its period (rows, transcript, runtime store) and keeps the rest, and audits the run', async () => {
    expect(inStore(oldUpstream)).toMatchObject({ sessions: 1 });
    expect(inStore(oldUpstream).messages).toBeGreaterThan(0);
    const run = await r.t.opened.core.retention.run(ctx());
    expect(run.removed).toEqual({ sessions: 1, usage: 2, trajectories: 1, audit: 3 });
    expect(run.sessionsLeft).toBe(0);

    // The old session: its rows, its turns, and its runtime session with its messages are gone.
    expect(await count(`select count(*)::int as n from agent_sessions where id = $1`, [oldSession])).toBe(0);
    expect(await count(`select count(*)::int as n from agent_turns where session_id = $1`, [oldSession])).toBe(0);
    expect(inStore(oldUpstream)).toEqual({ sessions: 0, messages: 0 });
    expect((await api(r.t, 'GET', `/v1/sessions/${oldSession}/messages`, { token: people.tokens.member })).status).toBe(404);
    // The recent one and the running one stay, the recent one's transcript too.
    expect(inStore(recentUpstream).sessions).toBe(1);
    const recent = await api(r.t, 'GET', `/v1/sessions/${recentSession}/messages`, { token: people.tokens.member });
    expect(JSON.stringify(recent.json)).toContain('a recent answer');
    expect(await count(`select count(*)::int as n from agent_sessions where id = $1 and deleted_at is null`, [runningSession])).toBe(1);
    // Usage, trajectories and audit entries: older gone, newer kept.
    expect(await count(`select count(*)::int as n from usage_records where tenant_id = $1 and created_at < now() - interval '100 days'`, [people.tenantId])).toBe(0);
    expect(await count(`select count(*)::int as n from usage_records where tenant_id = $1`, [people.tenantId])).toBeGreaterThanOrEqual(1);
    expect(await count(`select count(*)::int as n from trajectories where message_id like 'msg_retention_traj_%'`, [])).toBe(1);
    expect(await count(`select count(*)::int as n from trajectories where message_id = 'msg_retention_traj_1'`, [])).toBe(1);
    expect(await count(`select count(*)::int as n from audit_log where tenant_id = $1 and action = 'test.old'`, [people.tenantId])).toBe(1);
    // The run's own entry lists what it removed; the session's removal is audited on its own.
    const entries = (await db().query<{ details: any }>(`select details from audit_log where tenant_id = $1 and action = 'retention.run'`, [people.tenantId])).rows;
    expect(entries.map((e) => e.details.removed)).toEqual([{ sessions: 1, usage: 2, trajectories: 1, audit: 3 }]);
    expect(await count(`select count(*)::int as n from audit_log where tenant_id = $1 and action = 'session.purge' and session_id = $2`, [people.tenantId, oldSession])).toBe(1);
    // Everywhere else the audit log is still append-only.
    await expect(db().query(`delete from audit_log where tenant_id = $1`, [people.tenantId])).rejects.toThrow(/append-only/);
  });

  it('measures age with the injected clock, and the daily job runs every tenant with periods', async () => {
    // A year later by the service's clock: the recent session is old too; the running one still is not removable.
    shiftMs = 400 * DAY;
    try {
      const later = await r.t.opened.core.retention.run(ctx(), { dryRun: true });
      expect(later.removed.sessions).toBe(1);
      // Every trajectory left (the one inserted 5 days ago, and the recent turn's own, recorded by the worker).
      expect(later.removed.trajectories).toBe(await count(`select count(*)::int as n from trajectories where tenant_id = $1`, [people.tenantId]));
      expect(later.removed.trajectories).toBeGreaterThanOrEqual(1);
    } finally {
      shiftMs = 0;
    }
    const job = (await r.t.opened.core.jobHandlers[RETENTION_JOB](systemCtx(silentLogger, { name: 'worker', channel: 'worker' }), {}, { id: 'j', name: RETENTION_JOB })) as any;
    expect(job.tenants).toEqual([{ tenantId: people.tenantId, slug: 'keep', removed: { sessions: 0, usage: 0, trajectories: 0, audit: 0 }, sessionsLeft: 0 }]);
    expect(r.t.opened.core.schedules[RETENTION_JOB]).toMatch(/^\d+ \d+ \* \* \*$/);
    expect(existsSync(storeOf(people.ids.mia))).toBe(true);
  });
});
