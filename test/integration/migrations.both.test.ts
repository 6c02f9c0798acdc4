import { afterEach, describe, expect, it } from 'vitest';
import { createDatabase } from '../../src/db/database.js';
import { createMigrator, readMigrations } from '../../src/db/migrator.js';
import { openTestCore } from '../helpers/core.js';
import { DB_MODE } from '../helpers/test-env.js';

describe(`migrations (${DB_MODE})`, () => {
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await cleanup?.();
    cleanup = undefined;
  });

  it('apply on a fresh database, are idempotent, and report status', async () => {
    const t = await openTestCore({ migrate: false });
    cleanup = t.close;
    const { migrator, db } = t.opened.core;
    const files = readMigrations().map((f) => f.name);
    expect(files.length).toBeGreaterThan(0);

    const before = await migrator.status();
    expect(before.map((m) => m.name)).toEqual(files);
    expect(before.every((m) => m.appliedAt === null)).toBe(true);

    expect(await migrator.up()).toEqual(files);
    const after = await migrator.status();
    expect(after.every((m) => m.appliedAt instanceof Date)).toBe(true);
    expect(await migrator.pending()).toEqual([]);

    // Second run: nothing to do, nothing changes.
    expect(await migrator.up()).toEqual([]);
    expect((await migrator.status()).map((m) => m.appliedAt)).toEqual(after.map((m) => m.appliedAt));

    const { rows } = await db.query<{ t: string }>(
      `select table_name as t from information_schema.tables where table_schema = 'public' order by 1`,
    );
    expect(rows.map((r) => r.t)).toEqual(expect.arrayContaining(['audit_log', 'roles', 'schema_migrations', 'tenants', 'user_roles', 'users']));
    const ext = await db.query(`select extversion from pg_extension where extname = 'vector'`);
    expect(ext.rowCount).toBe(1);
  });

  it('revert one step with down, then re-apply', async () => {
    const t = await openTestCore();
    cleanup = t.close;
    const { migrator, db } = t.opened.core;
    const last = readMigrations().at(-1)!.name;
    expect(await migrator.down()).toBe(last);
    expect(await migrator.pending()).toEqual([last]);
    expect(await migrator.up()).toEqual([last]);
    expect((await db.query(`select count(*)::int as n from tenants`)).rows[0].n).toBe(0);
  });

  it('two concurrent runs apply each migration exactly once', async () => {
    const t = await openTestCore({ migrate: false });
    cleanup = t.close;
    const { db } = t.opened.core;
    // A second, independent pool: what another process would have.
    const other = createDatabase(db.mode, db.connection, 3);
    try {
      const [a, b] = await Promise.all([createMigrator(db).up(), createMigrator(other).up()]);
      const files = readMigrations().map((f) => f.name);
      // Between them every migration ran once; neither failed.
      expect([...a, ...b].sort()).toEqual(expect.arrayContaining(files));
      const { rows } = await db.query<{ n: number }>(`select count(*)::int as n from schema_migrations`);
      expect(rows[0].n).toBe(files.length);
    } finally {
      await other.close();
    }
  });

  it('0030 gives SCIM tokens made before it an expiry: 180 days from their creation, at least 30 days from the upgrade', async () => {
    const t = await openTestCore({ migrate: false });
    cleanup = t.close;
    const { migrator, db } = t.opened.core;
    const names = readMigrations().map((f) => f.name);
    const at = names.indexOf('0030_scim_token_expiry');
    for (const name of names.slice(0, at)) await migrator.applyOne(name);
    const tenant = (await db.query<{ id: string }>(`insert into tenants (name, slug) values ('Old', 'old') returning id`)).rows[0].id;
    await db.query(
      `insert into scim_tokens (tenant_id, name, token_hash, created_by, created_at) values ($1, 'ancient', 'h1', 'user:x', now() - interval '400 days'), ($1, 'recent', 'h2', 'user:x', now() - interval '10 days')`,
      [tenant],
    );
    await migrator.applyOne('0030_scim_token_expiry');
    const { rows } = await db.query<{ name: string; days: number }>(`select name, round(extract(epoch from expires_at - now()) / 86400)::int as days from scim_tokens order by name`);
    expect(rows).toEqual([
      { name: 'ancient', days: 30 },
      { name: 'recent', days: 170 },
    ]);
    await expect(db.query(`insert into scim_tokens (tenant_id, name, token_hash, created_by) values ($1, 'new', 'h3', 'user:x')`, [tenant])).rejects.toThrow(/expires_at/);
  });

  it('0036 gives roles stored before it a model allow-list: every model, none for the system viewer', async () => {
    const t = await openTestCore({ migrate: false });
    cleanup = t.close;
    const { migrator, db } = t.opened.core;
    const names = readMigrations().map((f) => f.name);
    const at = names.indexOf('0036_role_models');
    for (const name of names.slice(0, at)) await migrator.applyOne(name);
    const tenant = (await db.query<{ id: string }>(`insert into tenants (name, slug) values ('Old', 'old') returning id`)).rows[0].id;
    const doc = JSON.stringify({ agents: { create: true }, tools: { allowed: '*', denied: [] } });
    await db.query(
      `insert into roles (tenant_id, name, description, permissions, is_system) values ($1, 'member', '', $2, true), ($1, 'viewer', '', '{}', true), ($1, 'reviewer', '', $2, false)`,
      [tenant, doc],
    );
    await migrator.applyOne('0036_role_models');
    const { rows } = await db.query<{ name: string; models: unknown; tools: unknown }>(`select name, permissions->'models' as models, permissions->'tools' as tools from roles order by name`);
    expect(rows).toEqual([
      { name: 'member', models: { allowed: '*' }, tools: { allowed: '*', denied: [] } },
      { name: 'reviewer', models: { allowed: '*' }, tools: { allowed: '*', denied: [] } },
      { name: 'viewer', models: { allowed: [] }, tools: null },
    ]);
  });

  it('the audit log is append-only', async () => {
    const t = await openTestCore();
    cleanup = t.close;
    const { db } = t.opened.core;
    await db.query(`insert into audit_log (actor, action) values ('system:test', 'x.y')`);
    await expect(db.query(`update audit_log set action = 'z'`)).rejects.toThrow(/append-only/);
    await expect(db.query(`delete from audit_log`)).rejects.toThrow(/append-only/);
  });
});
