import type { Database } from '../../db/database.js';
import type { AuditService } from '../audit/audit.service.js';
import type { Ctx } from '../../kernel/context.js';
import type { EventLedgerRepo } from './event-ledger.repo.js';
import type { TurnEvents } from './turn-events.js';

/** The job that records the facts the session stream sees on the runtime's stream (enqueued by session-stream.ts). */
export const ANALYTICS_JOB = 'agent-analytics';

export interface AnalyticsData {
  kind: 'tool' | 'denied';
  key: string;
  sessionId: string;
  tenantId: string;
  userId: string;
  channel: string;
  [k: string]: any;
}

export function createSessionAnalytics(deps: {
  db: Database;
  repo: Pick<EventLedgerRepo, 'claimLedgerKey'>;
  audit: Pick<AuditService, 'record'>;
  /** Told, in the recording transaction, that the agent loaded a skill (learned skills count it). */
  events: Pick<TurnEvents, 'within'>;
}) {
  const { db, repo, audit } = deps;
  return {
    /**
     * The analytics job: records one fact seen on the runtime's stream, once (tool use, denials; usage is the LLM gateway's).
     * Every serving process sees the same facts; the ledger key makes the first job the only one.
     */
    async recordAnalytics(ctx: Ctx, data: AnalyticsData): Promise<void> {
      const actx: Ctx = { ...ctx, tenantId: data.tenantId, actor: { kind: 'system', name: 'agent' }, channel: data.channel };
      await db.transaction(async (tx) => {
        if (!(await repo.claimLedgerKey(tx, data.key))) return;
        switch (data.kind) {
          case 'tool':
            await audit.record(tx, actx, { action: 'tool.execute', target: data.tool, sessionId: data.sessionId, userId: data.userId, durationMs: data.durationMs, details: { callId: data.callId, status: data.status, ...(data.title ? { title: data.title } : {}) } });
            if (data.tool === 'skill' && data.status === 'completed' && typeof data.skill === 'string') {
              await deps.events.within('skill.loaded', { tx, tenantId: data.tenantId, sessionId: data.sessionId, name: data.skill, callId: String(data.callId) });
            }
            break;
          case 'denied':
            await audit.record(tx, actx, { action: 'tool.denied', target: data.tool, sessionId: data.sessionId, userId: data.userId, details: { reason: data.reason, patterns: data.patterns } });
            break;
        }
      });
    },
  };
}
