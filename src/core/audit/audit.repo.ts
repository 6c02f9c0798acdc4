import type { Queryable } from '../../db/database.js';

export interface AuditRecord {
  tenantId: string | null;
  userId: string | null;
  actor: string;
  action: string;
  target: string;
  sessionId?: string | null;
  channel: string;
  durationMs?: number | null;
  details?: Record<string, unknown>;
}

export interface AuditEntry {
  id: string;
  ts: Date;
  tenantId: string | null;
  userId: string | null;
  actor: string;
  action: string;
  target: string;
  sessionId: string | null;
  channel: string;
  durationMs: number | null;
}

export interface AuditFilter {
  /** null: every tenant (operator only). */
  tenantId: string | null;
  action?: string;
  userId?: string;
  /** Entries by any of these users or about them (target `user:<id>`). */
  people?: string[];
  since?: Date;
  until?: Date;
  /**
   * Entries strictly after this one in the order they were written (ts, then seq), oldest first: how
   * `audit tail --follow` pages forward.
   */
  afterId?: string;
  limit: number;
}

const ENTRY_COLS = `id, ts, tenant_id as "tenantId", user_id as "userId", actor, action, target, session_id as "sessionId", channel, duration_ms as "durationMs"`;

export function createAuditRepo() {
  return {
    /**
     * Newest first (or, with `after`, oldest first). Every filter is a plain column comparison so the
     * (tenant_id, ts) / (tenant_id, action, ts) / (tenant_id, user_id, ts) indexes serve it.
     */
    async query(q: Queryable, f: AuditFilter): Promise<AuditEntry[]> {
      const where: string[] = [];
      const args: unknown[] = [];
      const add = (sql: string, value: unknown) => {
        args.push(value);
        where.push(sql.replace('?', `$${args.length}`));
      };
      if (f.tenantId) add('tenant_id = ?', f.tenantId);
      if (f.action) add('action = ?', f.action);
      if (f.userId) add('user_id = ?', f.userId);
      if (f.people) {
        args.push(f.people, f.people.map((id) => `user:${id}`));
        where.push(`(user_id = any($${args.length - 1}::uuid[]) or target = any($${args.length}::text[]))`);
      }
      if (f.since) add('ts >= ?', f.since);
      if (f.until) add('ts <= ?', f.until);
      if (f.afterId) {
        // Compared with the stored row, not a copy of its timestamp: JavaScript dates drop microseconds.
        args.push(f.afterId);
        where.push(`(ts, seq) > (select a.ts, a.seq from audit_log a where a.id = $${args.length})`);
      }
      args.push(f.limit);
      // Entries that share a timestamp (the embedded database keeps milliseconds) in the order they were
      // written (migrations/0014_audit_write_order.sql).
      const order = f.afterId ? 'ts asc, seq asc' : 'ts desc, seq desc';
      const { rows } = await q.query<AuditEntry>(
        `select ${ENTRY_COLS} from audit_log ${where.length ? `where ${where.join(' and ')}` : ''} order by ${order} limit $${args.length}`,
        args,
      );
      return rows;
    },

    /** Distinct values of `details.<field>` in one actor's entries of an action and target since a moment. */
    async countDistinctDetail(q: Queryable, f: { tenantId: string; actor: string; action: string; target: string; field: string; since: Date }): Promise<number> {
      const { rows } = await q.query<{ n: number }>(
        `select count(distinct details ->> $5)::int as n from audit_log where tenant_id = $1 and action = $2 and ts > $3 and actor = $4 and target = $6`,
        [f.tenantId, f.action, f.since, f.actor, f.field, f.target],
      );
      return rows[0].n;
    },

    async insert(q: Queryable, r: AuditRecord): Promise<{ id: string; ts: Date }> {
      const { rows } = await q.query<{ id: string; ts: Date }>(
        `insert into audit_log (tenant_id, user_id, actor, action, target, session_id, channel, duration_ms, details)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9) returning id, ts`,
        [r.tenantId, r.userId, r.actor, r.action, r.target, r.sessionId ?? null, r.channel, r.durationMs ?? null, r.details ?? {}],
      );
      return rows[0];
    },
    /**
     * Entries that may be about a person, oldest first, with their details: recorded as theirs, acted by
     * them, or naming their id anywhere, or their email or handle in the details. Candidates only: the
     * text is matched loosely here (`al@acme.test` is found inside `val@acme.test`), and the caller keeps
     * those the whole-value rule says are theirs (privacy-fns.ts isAboutPerson, scrubAuditEntry).
     */
    async aboutPerson(q: Queryable, tenantId: string, p: { id: string; email: string; handle: string }): Promise<Array<AuditEntry & { details: Record<string, unknown> }>> {
      const { rows } = await q.query<AuditEntry & { details: Record<string, unknown> }>(
        `select ${ENTRY_COLS}, details from audit_log
          where tenant_id = $1
            and (user_id::text = $2::text or actor = 'user:' || $2::text or strpos(target, $2::text) > 0 or strpos(details::text, $2::text) > 0
                 or strpos(lower(target), lower($3::text)) > 0 or strpos(lower(details::text), lower($3::text)) > 0 or strpos(lower(details::text), lower('"' || $4::text || '"')) > 0)
          order by ts, seq`,
        [tenantId, p.id, p.email, p.handle],
      );
      return rows;
    },
    /**
     * Rewrites the person-naming columns of entries (an erasure's pseudonymisation), in the caller's
     * transaction: the only update audit_log lets through (migrations/0028_person_data.sql).
     */
    async rewritePerson(tx: Queryable, rows: Array<{ id: string; userId: string | null; actor: string; target: string; details: Record<string, unknown> }>): Promise<void> {
      if (!rows.length) return;
      await tx.query(`select set_config('agentws.audit_erasure', 'on', true)`);
      for (const r of rows) {
        await tx.query(`update audit_log set user_id = $2, actor = $3, target = $4, details = $5 where id = $1`, [r.id, r.userId, r.actor, r.target, r.details]);
      }
      await tx.query(`select set_config('agentws.audit_erasure', '', true)`);
    },


    /** How many of the tenant's entries were written before `before` (retention's dry run). */
    async countBefore(q: Queryable, tenantId: string, before: Date): Promise<number> {
      const { rows } = await q.query<{ n: number }>(`select count(*)::int as n from audit_log where tenant_id = $1 and ts < $2`, [tenantId, before]);
      return rows[0].n;
    },
    /**
     * Removes up to `limit` of the tenant's oldest entries written before `before` (retention), in the
     * caller's transaction, which declares the removal first: the only delete audit_log lets through
     * (migrations/0027_retention.sql). How many went.
     */
    async removeBefore(tx: Queryable, tenantId: string, before: Date, limit: number): Promise<number> {
      await tx.query(`select set_config('agentws.audit_retention_tenant', $1, true), set_config('agentws.audit_retention_before', $2, true)`, [tenantId, before.toISOString()]);
      const { rowCount } = await tx.query(
        `delete from audit_log where id in (select id from audit_log where tenant_id = $1 and ts < $2 order by ts, seq limit $3)`,
        [tenantId, before, limit],
      );
      await tx.query(`select set_config('agentws.audit_retention_tenant', '', true), set_config('agentws.audit_retention_before', '', true)`);
      return rowCount ?? 0;
    },
  };
}

export type AuditRepo = ReturnType<typeof createAuditRepo>;
