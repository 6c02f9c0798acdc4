import type { Queryable } from '../../db/database.js';

/**
 * A permission request's session is the given one or one of its child sessions (a plan's subtasks ask
 * through their parent): the condition on `r.session_id`, with the session's and the tenant's parameters.
 */
const inFamily = (r: string, session: string, tenant: string) =>
  `(${r}.session_id = ${session} or ${r}.session_id in (select c.id from agent_sessions c where c.parent_id = ${session} and c.tenant_id = ${tenant}))`;

/** The permission requests runtimes asked in sessions and nobody answered yet (runtime_permission_requests). */
export function createPermissionRequestsRepo() {
  return {
    /** Records a permission request the runtime asked in a session (every serve process sees it: once). */
    async recordPermissionRequest(q: Queryable, r: { id: string; tenantId: string; sessionId: string; permission: string; patterns: string[] }): Promise<void> {
      await q.query(
        `insert into runtime_permission_requests (id, tenant_id, session_id, permission, patterns) values ($1, $2, $3, $4, $5) on conflict (id) do nothing`,
        [r.id, r.tenantId, r.sessionId, r.permission, JSON.stringify(r.patterns)],
      );
    },

    /** The requests still waiting for an answer in a session or its child sessions (a plan's subtasks), oldest first. */
    async pendingPermissionRequests(q: Queryable, tenantId: string, sessionId: string): Promise<Array<{ id: string; sessionId: string; permission: string; patterns: string[]; askedAt: Date }>> {
      const { rows } = await q.query<{ id: string; sessionId: string; permission: string; patterns: string[]; askedAt: Date }>(
        `select r.id, r.session_id as "sessionId", r.permission, r.patterns, r.asked_at as "askedAt" from runtime_permission_requests r
          where r.tenant_id = $1 and ${inFamily('r', '$2', '$1')}
          order by r.asked_at, r.id`,
        [tenantId, sessionId],
      );
      return rows;
    },

    /**
     * Takes a pending permission request of a session for answering: of several concurrent replies only
     * one gets it. Null when the session has no such request (unknown, another session's, answered).
     */
    async takePermissionRequest(q: Queryable, tenantId: string, sessionId: string, id: string): Promise<{ id: string; permission: string } | null> {
      const { rows } = await q.query<{ id: string; permission: string }>(
        `delete from runtime_permission_requests where id = $1 and tenant_id = $2 and session_id = $3 returning id, permission`,
        [id, tenantId, sessionId],
      );
      return rows[0] ?? null;
    },

    /**
     * Like takePermissionRequest, for a request of the session or of one of its child sessions (a
     * plan's subtasks ask through their parent): which session asked comes back with it.
     */
    async takeFamilyPermissionRequest(q: Queryable, tenantId: string, sessionId: string, id: string): Promise<{ id: string; permission: string; sessionId: string } | null> {
      const { rows } = await q.query<{ id: string; permission: string; sessionId: string }>(
        `delete from runtime_permission_requests r where r.id = $1 and r.tenant_id = $2
            and ${inFamily('r', '$3', '$2')}
          returning r.id, r.permission, r.session_id as "sessionId"`,
        [id, tenantId, sessionId],
      );
      return rows[0] ?? null;
    },

    /** Forgets requests older than `before`: the runtime no longer holds them (restarted, or turns long over). */
    async dropPermissionRequestsBefore(q: Queryable, before: Date): Promise<void> {
      // Maintenance across tenants, by age alone.
      await q.query(`delete from runtime_permission_requests where asked_at < $1`, [before]);
    },
  };
}

export type PermissionRequestsRepo = ReturnType<typeof createPermissionRequestsRepo>;
