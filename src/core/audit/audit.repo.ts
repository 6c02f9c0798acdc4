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

export function createAuditRepo() {
  return {
    async insert(q: Queryable, r: AuditRecord): Promise<{ id: string; ts: Date }> {
      const { rows } = await q.query<{ id: string; ts: Date }>(
        `insert into audit_log (tenant_id, user_id, actor, action, target, session_id, channel, duration_ms, details)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9) returning id, ts`,
        [r.tenantId, r.userId, r.actor, r.action, r.target, r.sessionId ?? null, r.channel, r.durationMs ?? null, r.details ?? {}],
      );
      return rows[0];
    },
  };
}

export type AuditRepo = ReturnType<typeof createAuditRepo>;
