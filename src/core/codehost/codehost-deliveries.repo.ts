import type { Queryable } from '../../db/database.js';

/** A delivery a host sent: the replay guard and the admin's log of outcomes. */
export interface DeliveryRow {
  id: string;
  tenantId: string;
  hostId: string;
  deliveryId: string;
  event: string;
  outcome: 'queued' | 'ignored' | 'refused' | 'test';
  reason: string | null;
  repo: string | null;
  targetType: 'issue' | 'pull_request' | null;
  targetNumber: number | null;
  targetUrl: string | null;
  actorLogin: string | null;
  userId: string | null;
  /** How many times the same delivery came again (host retries, the other serve). */
  replays: number;
  receivedAt: Date;
}

export type NewDelivery = Omit<DeliveryRow, 'replays' | 'receivedAt'>;

/** One delivery as the admin's log shows it: the person it mapped to by handle (null: unmapped, or not a trigger). */
export type LoggedDelivery = Omit<DeliveryRow, 'tenantId' | 'hostId' | 'userId'> & { handle: string | null };

const COLS = `d.id, d.tenant_id as "tenantId", d.host_id as "hostId", d.delivery_id as "deliveryId", d.event, d.outcome, d.reason, d.repo,
  d.target_type as "targetType", d.target_number as "targetNumber", d.target_url as "targetUrl", d.actor_login as "actorLogin", d.user_id as "userId",
  d.replays, d.received_at as "receivedAt"`;

/** All SQL of code_host_deliveries. */
export function createCodeHostDeliveriesRepo() {
  return {
    /**
     * Records a delivery once per host and delivery id: the first to commit inserts it (`fresh`); any other
     * (a host's retry, the same delivery at another serve, even at the same moment: the insert waits for the
     * first's transaction) only counts a replay on that row and learns its id.
     */
    async record(q: Queryable, d: NewDelivery, receivedAt: Date): Promise<{ id: string; fresh: boolean }> {
      const { rows } = await q.query<{ id: string; fresh: boolean }>(
        `insert into code_host_deliveries as d (id, tenant_id, host_id, delivery_id, event, outcome, reason, repo, target_type, target_number, target_url, actor_login, user_id, received_at)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
         on conflict (host_id, delivery_id) do update set replays = d.replays + 1
         returning d.id, (xmax = 0) as fresh`,
        [d.id, d.tenantId, d.hostId, d.deliveryId, d.event, d.outcome, d.reason, d.repo, d.targetType, d.targetNumber, d.targetUrl, d.actorLogin, d.userId, receivedAt],
      );
      return rows[0]!;
    },

    /** Runs queued since `since` on a repository of a host: by the person, and by anyone (the rate limit). */
    async queuedSince(q: Queryable, tenantId: string, hostId: string, repo: string, userId: string, since: Date): Promise<{ person: number; repo: number }> {
      const { rows } = await q.query<{ person: number; repo: number }>(
        `select count(*) filter (where d.user_id = $4)::int as person, count(*)::int as repo
           from code_host_deliveries d
          where d.tenant_id = $1 and d.host_id = $2 and d.repo = $3 and d.outcome = 'queued' and d.received_at >= $5`,
        [tenantId, hostId, repo, userId, since],
      );
      return rows[0] ?? { person: 0, repo: 0 };
    },

    /** Refusals answered to a host account on a repository since `since` (refusal answers are limited too). */
    async refusedSince(q: Queryable, tenantId: string, hostId: string, repo: string, actorLogin: string, since: Date): Promise<number> {
      const { rows } = await q.query<{ n: number }>(
        `select count(*)::int as n from code_host_deliveries d
          where d.tenant_id = $1 and d.host_id = $2 and d.received_at >= $5 and d.outcome = 'refused' and d.repo = $3 and lower(d.actor_login) = lower($4)
            and d.reason <> 'not_allowed_repo'`,
        [tenantId, hostId, repo, actorLogin, since],
      );
      return rows[0]?.n ?? 0;
    },

    /** The admin's log: the host's latest deliveries with the person each mapped to, newest first (the index code_host_deliveries_recent serves it). */
    async log(q: Queryable, tenantId: string, hostId: string, limit: number): Promise<LoggedDelivery[]> {
      const { rows } = await q.query<LoggedDelivery>(
        `select d.id, d.delivery_id as "deliveryId", d.event, d.outcome, d.reason, d.repo, d.target_type as "targetType", d.target_number as "targetNumber",
                d.target_url as "targetUrl", d.actor_login as "actorLogin", u.handle, d.replays, d.received_at as "receivedAt"
           from code_host_deliveries d left join users u on u.id = d.user_id and u.tenant_id = d.tenant_id
          where d.tenant_id = $1 and d.host_id = $2
          order by d.received_at desc, d.id desc
          limit $3`,
        [tenantId, hostId, limit],
      );
      return rows;
    },

    /** The latest deliveries of a host, newest first (as stored). */
    async recent(q: Queryable, tenantId: string, hostId: string, limit: number): Promise<DeliveryRow[]> {
      return (
        await q.query<DeliveryRow>(`select ${COLS} from code_host_deliveries d where d.tenant_id = $1 and d.host_id = $2 order by d.received_at desc, d.id limit $3`, [
          tenantId,
          hostId,
          Math.max(1, Math.min(500, Math.floor(limit))),
        ])
      ).rows;
    },

    /** Deletes up to `batch` deliveries received before `before` (every tenant: the daily sweep); how many. */
    async deleteBefore(q: Queryable, before: Date, batch: number): Promise<number> {
      const { rowCount } = await q.query(`delete from code_host_deliveries where id in (select id from code_host_deliveries where received_at < $1 limit $2)`, [before, batch]);
      return rowCount ?? 0;
    },
  };
}

export type CodeHostDeliveriesRepo = ReturnType<typeof createCodeHostDeliveriesRepo>;
