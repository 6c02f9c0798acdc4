import { afterEach, describe, expect, it } from 'vitest';
import { createMigrator, readMigrations } from '../../src/db/migrator.js';
import { openTestCore } from '../helpers/core.js';
import { DB_MODE } from '../helpers/test-env.js';

/** 0006 gives pairing codes and paired users their tenant: data made before it is backfilled from the gateway. */
describe(`migration 0006_pairing_tenant on existing pairing data (${DB_MODE})`, () => {
  let cleanup: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await cleanup?.();
    cleanup = undefined;
  });

  it('backfills tenant_id from the gateway, then requires it', async () => {
    const t = await openTestCore({ migrate: false });
    cleanup = t.close;
    const { db } = t.opened.core;
    const before = readMigrations().filter((m) => m.name < '0006');
    expect(before.length).toBeGreaterThanOrEqual(4);
    await createMigrator(db, before).up();

    // Two tenants, each with a gateway, a pending and a used code, and a paired user: the schema before 0006.
    const made: Array<{ tenantId: string; gatewayId: string }> = [];
    for (const slug of ['acme', 'beta']) {
      // In SQL, as that schema had them (today's services write columns it did not have yet).
      const tenant = (await db.query<{ id: string }>(`insert into tenants (name, slug) values ($1, $1) returning id`, [slug])).rows[0];
      const owner = (await db.query<{ id: string }>(`insert into users (tenant_id, handle, email) values ($1, 'owner', $2) returning id`, [tenant.id, `owner@${slug}.example`])).rows[0];
      const { rows } = await db.query<{ id: string }>(
        `insert into gateways (tenant_id, kind, bot_username, bot_id, bot_token_sealed, service_user_id) values ($1, 'bot_chat', $2, '1', 'v1.x', $3) returning id`,
        [tenant.id, `${slug}_bot`, owner.id],
      );
      const gatewayId = rows[0].id;
      await db.query(
        `insert into pairing_codes (gateway_id, code, external_user_id, chat_id, expires_at, consumed_at) values
           ($1, $2, '7', '7', now() + interval '1 hour', null), ($1, $3, '8', '8', now() + interval '1 hour', now())`,
        [gatewayId, `${slug.toUpperCase()}CD1`.slice(0, 8), `${slug.toUpperCase()}CD2`.slice(0, 8)],
      );
      await db.query(`insert into paired_users (gateway_id, external_user_id, chat_id, approved_by) values ($1, '8', '8', 'system:cli')`, [gatewayId]);
      made.push({ tenantId: tenant.id, gatewayId });
    }

    expect(await createMigrator(db).up()).toContain('0006_pairing_tenant');
    for (const { tenantId, gatewayId } of made) {
      const codes = await db.query<{ tenant_id: string }>(`select tenant_id from pairing_codes where gateway_id = $1`, [gatewayId]);
      expect(codes.rows.map((r) => r.tenant_id)).toEqual([tenantId, tenantId]);
      const users = await db.query<{ tenant_id: string }>(`select tenant_id from paired_users where gateway_id = $1`, [gatewayId]);
      expect(users.rows.map((r) => r.tenant_id)).toEqual([tenantId]);
    }
    // From now on the tenant is required, and must be the gateway's.
    await expect(db.query(`insert into pairing_codes (gateway_id, code, external_user_id, chat_id, expires_at) values ($1, 'NOTENANT', '9', '9', now())`, [made[0].gatewayId])).rejects.toThrow(/null value/);
    await expect(
      db.query(`insert into paired_users (tenant_id, gateway_id, external_user_id, chat_id, approved_by) values ($1, $2, '9', '9', 'x')`, [made[1].tenantId, made[0].gatewayId]),
    ).rejects.toThrow(/foreign key/);

    // Deleting a tenant still removes its pairing data.
    await db.query(`delete from gateways where tenant_id = $1`, [made[0].tenantId]);
    const left = await db.query<{ n: number }>(`select count(*)::int as n from pairing_codes where tenant_id = $1`, [made[0].tenantId]);
    expect(left.rows[0].n).toBe(0);
  });
});
