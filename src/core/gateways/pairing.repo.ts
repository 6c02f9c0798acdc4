import type { Database, Queryable, Tx } from '../../db/database.js';

export interface PairingCodeRow {
  id: string;
  tenantId: string;
  gatewayId: string;
  code: string;
  externalUserId: string;
  externalUserName: string;
  platformDisplayName: string;
  chatId: string;
  expiresAt: Date;
  createdAt: Date;
  consumedAt: Date | null;
}

export interface PairedUserRow {
  id: string;
  tenantId: string;
  gatewayId: string;
  externalUserId: string;
  externalUserName: string;
  platformDisplayName: string;
  chatId: string;
  sessionId: string | null;
  pairedAt: Date;
}

const CODE = `c.id, c.tenant_id as "tenantId", c.gateway_id as "gatewayId", c.code, c.external_user_id as "externalUserId", c.external_user_name as "externalUserName",
  c.platform_display_name as "platformDisplayName", c.chat_id as "chatId", c.expires_at as "expiresAt", c.created_at as "createdAt", c.consumed_at as "consumedAt"`;
const PAIRED = `p.id, p.tenant_id as "tenantId", p.gateway_id as "gatewayId", p.external_user_id as "externalUserId", p.external_user_name as "externalUserName",
  p.platform_display_name as "platformDisplayName", p.chat_id as "chatId", p.session_id as "sessionId", p.paired_at as "pairedAt"`;
/** Pending: neither consumed nor denied, and not expired (at `$now`). */
const pending = (now: string) => `c.consumed_at is null and c.denied_at is null and c.expires_at > ${now}`;

/** Pairing codes and paired users (DESIGN.md 8). Every query names the tenant. */
export function createPairingRepo() {
  return {
    /** Serialises code issuing on one gateway, so the pending limit and the per-user rules hold under races. */
    async lockGateway(tx: Tx, gatewayId: string): Promise<void> {
      await tx.query(`select pg_advisory_xact_lock(hashtext($1))`, [gatewayId]);
    },

    /** The user's pending code with whether it is due to be sent again (hot: every message of an unpaired user). */
    async openCodeOf(db: Database, k: { tenantId: string; gatewayId: string; externalUserId: string }, now: Date, resendBefore: Date): Promise<{ id: string; code: string; due: boolean } | null> {
      const { rows } = await db.hot<{ id: string; code: string; due: boolean }>(
        'pairing.open-code',
        `select c.id, c.code, (c.last_sent_at is null or c.last_sent_at <= $5) as due from pairing_codes c
          where c.tenant_id = $1 and c.gateway_id = $2 and c.external_user_id = $3 and ${pending('$4')} limit 1`,
        [k.tenantId, k.gatewayId, k.externalUserId, now, resendBefore],
      );
      return rows[0] ?? null;
    },

    async hasOpenCode(q: Queryable, k: { tenantId: string; gatewayId: string; externalUserId: string }, now: Date): Promise<boolean> {
      const { rows } = await q.query(
        `select 1 from pairing_codes c where c.tenant_id = $1 and c.gateway_id = $2 and c.external_user_id = $3 and ${pending('$4')} limit 1`,
        [k.tenantId, k.gatewayId, k.externalUserId, now],
      );
      return rows.length > 0;
    },

    /** Whether the user got a code since `since` that was not used (pending, denied or expired). */
    async hasUnusedCodeSince(q: Queryable, k: { tenantId: string; gatewayId: string; externalUserId: string }, since: Date): Promise<boolean> {
      const { rows } = await q.query(
        `select 1 from pairing_codes c where c.tenant_id = $1 and c.gateway_id = $2 and c.external_user_id = $3 and c.consumed_at is null and c.created_at > $4 limit 1`,
        [k.tenantId, k.gatewayId, k.externalUserId, since],
      );
      return rows.length > 0;
    },

    async countPending(q: Queryable, tenantId: string, gatewayId: string, now: Date): Promise<number> {
      const { rows } = await q.query<{ n: number }>(`select count(*)::int as n from pairing_codes c where c.tenant_id = $1 and c.gateway_id = $2 and ${pending('$3')}`, [tenantId, gatewayId, now]);
      return rows[0].n;
    },

    /** Expired codes of the gateway give their code back to the pool of unused ones. */
    async retireExpired(q: Queryable, tenantId: string, gatewayId: string, now: Date): Promise<void> {
      await q.query(`update pairing_codes set denied_at = $3 where tenant_id = $1 and gateway_id = $2 and expires_at <= $3 and consumed_at is null and denied_at is null`, [tenantId, gatewayId, now]);
    },

    /** Inserts a pending code; null when the code is already pending somewhere (pick another). */
    async insertCode(
      q: Queryable,
      c: { tenantId: string; gatewayId: string; code: string; externalUserId: string; externalUserName: string; platformDisplayName: string; chatId: string; expiresAt: Date; now: Date },
    ): Promise<string | null> {
      const { rows } = await q.query<{ id: string }>(
        `insert into pairing_codes (tenant_id, gateway_id, code, external_user_id, external_user_name, platform_display_name, chat_id, expires_at, created_at, last_sent_at)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) on conflict (code) where consumed_at is null and denied_at is null do nothing returning id`,
        [c.tenantId, c.gatewayId, c.code, c.externalUserId, c.externalUserName, c.platformDisplayName, c.chatId, c.expiresAt, c.now],
      );
      return rows[0]?.id ?? null;
    },

    /** Records that a code is being sent again; false when another retry got there first (since `before`). */
    async markResent(q: Queryable, tenantId: string, id: string, now: Date, before: Date): Promise<boolean> {
      const { rowCount } = await q.query(
        `update pairing_codes set last_sent_at = $3 where tenant_id = $1 and id = $2 and (last_sent_at is null or last_sent_at <= $4)`,
        [tenantId, id, now, before],
      );
      return (rowCount ?? 0) > 0;
    },

    /** The gateway of a pending code of the tenant (`aws pair approve <code>` without a gateway). */
    async gatewayOfPendingCode(q: Queryable, tenantId: string, code: string, now: Date): Promise<string | null> {
      const { rows } = await q.query<{ gatewayId: string }>(`select c.gateway_id as "gatewayId" from pairing_codes c where c.tenant_id = $1 and c.code = $2 and ${pending('$3')}`, [tenantId, code, now]);
      return rows[0]?.gatewayId ?? null;
    },

    /** Consumes a pending code; null when there is none (unknown, expired, used or denied). */
    async consume(q: Queryable, tenantId: string, gatewayId: string, code: string, now: Date): Promise<PairingCodeRow | null> {
      const { rows } = await q.query<PairingCodeRow>(
        `update pairing_codes c set consumed_at = $4 where c.tenant_id = $1 and c.gateway_id = $2 and c.code = $3 and ${pending('$4')} returning ${CODE}`,
        [tenantId, gatewayId, code, now],
      );
      return rows[0] ?? null;
    },

    /** Whether the gateway ever issued this code (in any state: pending, used, denied or expired). */
    async codeIssued(q: Queryable, tenantId: string, gatewayId: string, code: string): Promise<boolean> {
      const { rows } = await q.query(`select 1 from pairing_codes c where c.tenant_id = $1 and c.gateway_id = $2 and c.code = $3 limit 1`, [tenantId, gatewayId, code]);
      return rows.length > 0;
    },

    /** Denies a pending code (of one gateway, or of any gateway of the tenant). */
    async deny(q: Queryable, tenantId: string, gatewayId: string | null, code: string, now: Date): Promise<{ id: string; gatewayId: string; externalUserId: string } | null> {
      const { rows } = await q.query<{ id: string; gatewayId: string; externalUserId: string }>(
        `update pairing_codes c set denied_at = $4
          where c.tenant_id = $1 and ($2::uuid is null or c.gateway_id = $2) and c.code = $3 and ${pending('$4')}
          returning c.id, c.gateway_id as "gatewayId", c.external_user_id as "externalUserId"`,
        [tenantId, gatewayId, code, now],
      );
      return rows[0] ?? null;
    },

    /** Pending codes of the tenant (of one gateway, or all), oldest first, with their gateway's bot. */
    async pendingCodes(q: Queryable, tenantId: string, gatewayId: string | null, now: Date): Promise<Array<PairingCodeRow & { gatewayKind: string; botUsername: string }>> {
      const { rows } = await q.query<PairingCodeRow & { gatewayKind: string; botUsername: string }>(
        `select ${CODE}, g.kind as "gatewayKind", g.bot_username as "botUsername" from pairing_codes c join gateways g on g.id = c.gateway_id and g.tenant_id = c.tenant_id
          where c.tenant_id = $1 and ($2::uuid is null or c.gateway_id = $2) and ${pending('$3')}
          order by c.created_at`,
        [tenantId, gatewayId, now],
      );
      return rows;
    },

    /** Codes of a gateway approved after `since` (the gateway stream's poll). */
    async approvedSince(q: Queryable, tenantId: string, gatewayId: string, since: Date): Promise<Array<{ codeId: string; userId: string }>> {
      const { rows } = await q.query<{ codeId: string; userId: string }>(
        `select c.id as "codeId", c.external_user_id as "userId" from pairing_codes c where c.tenant_id = $1 and c.gateway_id = $2 and c.consumed_at > $3 order by c.consumed_at`,
        [tenantId, gatewayId, since],
      );
      return rows;
    },

    /** Pairs a chat user (again: a re-paired user keeps their row and session). */
    async upsertPairedUser(q: Queryable, p: { tenantId: string; gatewayId: string; externalUserId: string; externalUserName: string; platformDisplayName: string; chatId: string; approvedBy: string }): Promise<void> {
      await q.query(
        `insert into paired_users (tenant_id, gateway_id, external_user_id, external_user_name, platform_display_name, chat_id, approved_by)
         values ($1, $2, $3, $4, $5, $6, $7)
         on conflict (gateway_id, external_user_id) do update set external_user_name = excluded.external_user_name, chat_id = excluded.chat_id, paired_at = now()`,
        [p.tenantId, p.gatewayId, p.externalUserId, p.externalUserName, p.platformDisplayName, p.chatId, p.approvedBy],
      );
    },

    /** A paired user by their chat id (hot: every message to the bot). */
    async pairedUser(db: Database, tenantId: string, gatewayId: string, externalUserId: string): Promise<{ id: string; sessionId: string | null } | null> {
      const { rows } = await db.hot<{ id: string; sessionId: string | null }>(
        'pairing.paired-user',
        `select id, session_id as "sessionId" from paired_users where tenant_id = $1 and gateway_id = $2 and external_user_id = $3`,
        [tenantId, gatewayId, externalUserId],
      );
      return rows[0] ?? null;
    },

    async pairedUsers(q: Queryable, tenantId: string, gatewayId: string): Promise<PairedUserRow[]> {
      return (await q.query<PairedUserRow>(`select ${PAIRED} from paired_users p where p.tenant_id = $1 and p.gateway_id = $2 order by p.paired_at`, [tenantId, gatewayId])).rows;
    },

    async pairedUserBySession(q: Queryable, tenantId: string, sessionId: string): Promise<PairedUserRow | null> {
      return (await q.query<PairedUserRow>(`select ${PAIRED} from paired_users p where p.tenant_id = $1 and p.session_id = $2`, [tenantId, sessionId])).rows[0] ?? null;
    },

    async setSession(q: Queryable, tenantId: string, pairedId: string, sessionId: string): Promise<void> {
      await q.query(`update paired_users set session_id = $3 where tenant_id = $1 and id = $2`, [tenantId, pairedId, sessionId]);
    },

    /** Unpairs a chat user; false when they were not paired. */
    async removePairedUser(q: Queryable, tenantId: string, gatewayId: string, externalUserId: string): Promise<boolean> {
      const { rowCount } = await q.query(`delete from paired_users where tenant_id = $1 and gateway_id = $2 and external_user_id = $3`, [tenantId, gatewayId, externalUserId]);
      return (rowCount ?? 0) > 0;
    },
  };
}

export type PairingRepo = ReturnType<typeof createPairingRepo>;
