import type { Queryable } from '../../db/database.js';

/** One issue or pull request handed to an agent (migration 0039): its session, branch and pull request. */
export interface CodeHostRunRow {
  id: string;
  tenantId: string;
  hostId: string;
  userId: string;
  sessionId: string | null;
  repo: string;
  projectId: number | null;
  targetType: 'issue' | 'pull_request';
  targetNumber: number;
  targetUrl: string;
  branch: string;
  base: string;
  prNumber: number | null;
  prUrl: string | null;
  /** The commit the agent's work stands on: checked out by the clone, then the last one pushed. */
  headSha: string | null;
  status: 'running' | 'opened' | 'no_changes' | 'failed' | 'refused';
  lastTurnId: string | null;
  lastDeliveryRowId: string | null;
  createdAt: Date;
  updatedAt: Date;
}

const RUN = `r.id, r.tenant_id as "tenantId", r.host_id as "hostId", r.user_id as "userId", r.session_id as "sessionId", r.repo,
  r.project_id::float8 as "projectId", r.target_type as "targetType", r.target_number as "targetNumber", r.target_url as "targetUrl",
  r.branch, r.base, r.pr_number as "prNumber", r.pr_url as "prUrl", r.head_sha as "headSha", r.status, r.last_turn_id as "lastTurnId",
  r.last_delivery_row_id as "lastDeliveryRowId", r.created_at as "createdAt", r.updated_at as "updatedAt"`;

export type CodeHostRunPatch = Partial<Pick<CodeHostRunRow, 'sessionId' | 'prNumber' | 'prUrl' | 'headSha' | 'status' | 'lastTurnId' | 'lastDeliveryRowId'>>;

export function createCodeHostRunsRepo() {
  return {
    async byId(q: Queryable, tenantId: string, id: string): Promise<CodeHostRunRow | null> {
      return (await q.query<CodeHostRunRow>(`select ${RUN} from code_host_runs r where r.tenant_id = $1 and r.id = $2`, [tenantId, id])).rows[0] ?? null;
    },
    /** The run asked for on this issue or pull request. */
    async byTarget(q: Queryable, tenantId: string, hostId: string, repo: string, type: 'issue' | 'pull_request', number: number): Promise<CodeHostRunRow | null> {
      return (
        await q.query<CodeHostRunRow>(`select ${RUN} from code_host_runs r where r.tenant_id = $1 and r.host_id = $2 and r.repo = $3 and r.target_type = $4 and r.target_number = $5`, [tenantId, hostId, repo, type, number])
      ).rows[0] ?? null;
    },
    /** The run whose pull request this is (a follow-up comment on a pull request the service opened). */
    async byPullRequest(q: Queryable, tenantId: string, hostId: string, repo: string, prNumber: number): Promise<CodeHostRunRow | null> {
      return (
        await q.query<CodeHostRunRow>(`select ${RUN} from code_host_runs r where r.tenant_id = $1 and r.host_id = $2 and r.repo = $3 and r.pr_number = $4 order by r.created_at limit 1`, [tenantId, hostId, repo, prNumber])
      ).rows[0] ?? null;
    },
    /** The run of a session, if the session is one (a turn's end looks here first: indexed). */
    async bySession(q: Queryable, tenantId: string, sessionId: string): Promise<CodeHostRunRow | null> {
      return (await q.query<CodeHostRunRow>(`select ${RUN} from code_host_runs r where r.tenant_id = $1 and r.session_id = $2 limit 1`, [tenantId, sessionId])).rows[0] ?? null;
    },
    /** Inserts the run, or returns the one a concurrent or earlier attempt inserted for the same target. */
    async insertOrGet(
      q: Queryable,
      r: Pick<CodeHostRunRow, 'tenantId' | 'hostId' | 'userId' | 'repo' | 'projectId' | 'targetType' | 'targetNumber' | 'targetUrl' | 'branch' | 'base'>,
    ): Promise<CodeHostRunRow> {
      const inserted = (
        await q.query<CodeHostRunRow>(
          `insert into code_host_runs as r (tenant_id, host_id, user_id, repo, project_id, target_type, target_number, target_url, branch, base)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) on conflict (host_id, repo, target_type, target_number) do nothing returning ${RUN}`,
          [r.tenantId, r.hostId, r.userId, r.repo, r.projectId, r.targetType, r.targetNumber, r.targetUrl, r.branch, r.base],
        )
      ).rows[0];
      if (inserted) return inserted;
      const existing = await this.byTarget(q, r.tenantId, r.hostId, r.repo, r.targetType, r.targetNumber);
      if (!existing) throw new Error('the code-host run vanished while it was inserted');
      return existing;
    },
    async update(q: Queryable, tenantId: string, id: string, p: CodeHostRunPatch): Promise<CodeHostRunRow | null> {
      const columns: Record<keyof CodeHostRunPatch, string> = {
        sessionId: 'session_id', prNumber: 'pr_number', prUrl: 'pr_url', headSha: 'head_sha', status: 'status', lastTurnId: 'last_turn_id', lastDeliveryRowId: 'last_delivery_row_id',
      };
      const sets: string[] = [];
      const values: unknown[] = [tenantId, id];
      for (const [key, column] of Object.entries(columns) as Array<[keyof CodeHostRunPatch, string]>) {
        if (p[key] === undefined) continue;
        values.push(p[key]);
        sets.push(`${column} = $${values.length}`);
      }
      const { rows } = await q.query<CodeHostRunRow>(`update code_host_runs r set ${[...sets, 'updated_at = now()'].join(', ')} where r.tenant_id = $1 and r.id = $2 returning ${RUN}`, values);
      return rows[0] ?? null;
    },
    /**
     * Takes the run for a delivery: true when it was free (or already this delivery's, or held for more
     * than an hour by a worker that died), false while another delivery works on it.
     */
    async claim(q: Queryable, tenantId: string, id: string, deliveryRowId: string): Promise<boolean> {
      const { rowCount } = await q.query(
        `update code_host_runs set working_delivery_row_id = $3, working_since = now()
          where tenant_id = $1 and id = $2
            and (working_delivery_row_id is null or working_delivery_row_id = $3 or working_since < now() - interval '1 hour')`,
        [tenantId, id, deliveryRowId],
      );
      return (rowCount ?? 0) > 0;
    },
    /** Frees the run, if this delivery still holds it. */
    async release(q: Queryable, tenantId: string, id: string, deliveryRowId: string): Promise<void> {
      await q.query(`update code_host_runs set working_delivery_row_id = null, working_since = null where tenant_id = $1 and id = $2 and working_delivery_row_id = $3`, [tenantId, id, deliveryRowId]);
    },
    /**
     * The sessions list's marker of a host-triggered session (agent_sessions.origin_url/origin_label, added
     * with this table by migration 0039 for this one writer; read by session-manage.repo.ts).
     */
    async markSession(q: Queryable, tenantId: string, sessionId: string, origin: { url: string; label: string }): Promise<void> {
      await q.query(`update agent_sessions set origin_url = $3, origin_label = $4 where tenant_id = $1 and id = $2`, [tenantId, sessionId, origin.url, origin.label.slice(0, 200)]);
    },
    /** What the session's model calls cost since `since` (the turn's start): usage is recorded per call. */
    async costSince(q: Queryable, tenantId: string, sessionId: string, since: Date): Promise<number> {
      const { rows } = await q.query<{ cost: string | null }>(`select sum(cost_usd) as cost from usage_records where tenant_id = $1 and session_id = $2 and created_at >= $3`, [tenantId, sessionId, since]);
      return Number(rows[0]?.cost ?? 0);
    },
    /** A turn's start and prompt (agent_turns: the sessions capability's; read only). */
    async turnStart(q: Queryable, tenantId: string, turnId: string): Promise<{ createdAt: Date; messageId: string; status: string; error: string | null } | null> {
      const { rows } = await q.query<{ createdAt: Date; messageId: string; status: string; error: string | null }>(
        `select created_at as "createdAt", message_id as "messageId", status, error from agent_turns where tenant_id = $1 and id = $2`,
        [tenantId, turnId],
      );
      return rows[0] ?? null;
    },
  };
}

export type CodeHostRunsRepo = ReturnType<typeof createCodeHostRunsRepo>;
