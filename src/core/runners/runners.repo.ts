import type { Queryable } from '../../db/database.js';
import type { RunnerState } from './runner-fns.js';

/** All SQL of runner_tokens, runners and runtime_placements. */
export interface RunnerTokenRow {
  id: string;
  name: string;
  createdBy: string | null;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
  /** The most runtimes any one runner of this token is counted to hold, whatever it reports. */
  maxCapacity: number;
  /** Names of the runners registered with it. */
  runners: string[];
}

export interface RunnerRow {
  id: string;
  name: string;
  tokenId: string | null;
  kind: 'local' | 'remote';
  address: string | null;
  labels: Record<string, string>;
  version: string | null;
  /** What placement counts: the reported capacity capped at the token's ceiling. */
  capacity: number;
  /** What the runner itself last reported (null: a local runner, or one registered before ceilings). */
  reportedCapacity: number | null;
  /** Its token's ceiling (null: a serve's local runner, which has no token). */
  maxCapacity: number | null;
  /** When a jump in its reported capacity was last logged and audited. */
  capacityNotedAt: Date | null;
  resident: number;
  busy: number;
  state: RunnerState;
  sharedStorage: boolean;
  serveId: string | null;
  relayUrl: string | null;
  registeredAt: Date;
  connectedAt: Date | null;
  heartbeatAt: Date | null;
  /** Users placed on it. */
  placed: number;
  /** Placements made since its last heartbeat (not yet in `resident`). */
  recent: number;
}

export interface PlacementRow {
  userId: string;
  tenantId: string;
  runnerId: string;
  fence: number;
  storage: 'local' | 'shared';
  placedAt: Date;
  /** The fence of the placement under which the user's current files were made current (see 0029). */
  filesFence: number;
  /** Moved by a drain with their files and conversation, and not told yet. */
  movedIntact: boolean;
}

const TOKEN = `t.id, t.name, t.created_by as "createdBy", t.created_at as "createdAt", t.last_used_at as "lastUsedAt", t.revoked_at as "revokedAt", t.max_capacity as "maxCapacity",
  array(select r.name from runners r where r.token_id = t.id order by r.name) as runners`;
const RUNNER = `r.id, r.name, r.token_id as "tokenId", r.kind, r.address, r.labels, r.version, r.capacity, r.reported_capacity as "reportedCapacity",
  (select t.max_capacity from runner_tokens t where t.id = r.token_id) as "maxCapacity", r.capacity_noted_at as "capacityNotedAt", r.resident, r.busy, r.state,
  r.shared_storage as "sharedStorage", r.serve_id as "serveId", r.relay_url as "relayUrl", r.registered_at as "registeredAt",
  r.connected_at as "connectedAt", r.heartbeat_at as "heartbeatAt",
  (select count(*)::int from runtime_placements p where p.runner_id = r.id) as placed,
  (select count(*)::int from runtime_placements p where p.runner_id = r.id and p.placed_at > coalesce(r.heartbeat_at, 'epoch'::timestamptz)) as recent`;
const PLACEMENT = `user_id as "userId", tenant_id as "tenantId", runner_id as "runnerId", fence::float8 as fence, storage, placed_at as "placedAt",
  files_fence::float8 as "filesFence", moved_intact as "movedIntact"`;

export function createRunnersRepo() {
  return {
    /**
     * The database's time. Heartbeats are stamped with it, so health is judged by it too: the clocks of
     * the control-plane hosts may differ from it and from each other.
     */
    async now(q: Queryable): Promise<Date> {
      return (await q.query<{ now: Date }>(`select now() as now`)).rows[0].now;
    },
    async insertToken(q: Queryable, t: { name: string; tokenHash: string; createdBy: string; maxCapacity: number }): Promise<RunnerTokenRow> {
      const { rows } = await q.query<{ id: string }>(`insert into runner_tokens (name, token_hash, created_by, max_capacity) values ($1, $2, $3, $4) returning id`, [t.name, t.tokenHash, t.createdBy, t.maxCapacity]);
      return (await q.query<RunnerTokenRow>(`select ${TOKEN} from runner_tokens t where t.id = $1`, [rows[0].id])).rows[0];
    },
    async listTokens(q: Queryable): Promise<RunnerTokenRow[]> {
      return (await q.query<RunnerTokenRow>(`select ${TOKEN} from runner_tokens t order by t.created_at, t.name`)).rows;
    },
    /** Serialises token creation per name (a name is held by one live token at a time). */
    async lockTokenName(q: Queryable, name: string): Promise<void> {
      await q.query(`select pg_advisory_xact_lock(hashtext('runner_token:' || $1::text))`, [name]);
    },
    /** A token by id, or by name: the live one of that name, else the latest revoked one. */
    async findToken(q: Queryable, ref: string): Promise<RunnerTokenRow | null> {
      const isId = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(ref);
      return (
        (await q.query<RunnerTokenRow>(`select ${TOKEN} from runner_tokens t where ${isId ? 't.id = $1::uuid' : 't.name = $1'} order by t.revoked_at desc nulls first limit 1`, [ref])).rows[0] ?? null
      );
    },
    /** The token with this hash (the unique index finds it; a hash compared in SQL leaks nothing of the token). */
    async tokenByHash(q: Queryable, hash: string): Promise<{ id: string; lastUsedAt: Date | null; revokedAt: Date | null } | null> {
      return (
        (await q.query<{ id: string; lastUsedAt: Date | null; revokedAt: Date | null }>(`select id, last_used_at as "lastUsedAt", revoked_at as "revokedAt" from runner_tokens where token_hash = $1`, [hash])).rows[0] ??
        null
      );
    },
    /** Sets a token's ceiling; its runners' counted capacity follows at once (their next heartbeat keeps it). */
    async setMaxCapacity(q: Queryable, id: string, maxCapacity: number): Promise<void> {
      await q.query(`update runner_tokens set max_capacity = $2 where id = $1`, [id, maxCapacity]);
      await q.query(`update runners set capacity = least(coalesce(reported_capacity, capacity), $2) where token_id = $1`, [id, maxCapacity]);
    },
    async touchToken(q: Queryable, id: string): Promise<void> {
      await q.query(`update runner_tokens set last_used_at = now() where id = $1 and (last_used_at is null or last_used_at < now() - interval '1 minute')`, [id]);
    },
    /** Revokes the token; its runners go offline (a lost one stays lost). Returns their names; null: it was revoked already. */
    async revokeToken(q: Queryable, id: string): Promise<string[] | null> {
      const r = await q.query(`update runner_tokens set revoked_at = now() where id = $1 and revoked_at is null`, [id]);
      if (!r.rowCount) return null;
      const { rows } = await q.query<{ name: string }>(
        `update runners set state = case when state = 'lost' then state else 'offline' end, serve_id = null, relay_url = null where token_id = $1 returning name`,
        [id],
      );
      return rows.map((x) => x.name).sort();
    },

    async runnerByName(q: Queryable, name: string): Promise<RunnerRow | null> {
      return (await q.query<RunnerRow>(`select ${RUNNER} from runners r where r.name = $1`, [name])).rows[0] ?? null;
    },
    async runnerById(q: Queryable, id: string): Promise<RunnerRow | null> {
      return (await q.query<RunnerRow>(`select ${RUNNER} from runners r where r.id = $1`, [id])).rows[0] ?? null;
    },
    async listRunners(q: Queryable): Promise<RunnerRow[]> {
      return (await q.query<RunnerRow>(`select ${RUNNER} from runners r order by r.kind desc, r.name`)).rows;
    },
    async anyRemote(q: Queryable): Promise<boolean> {
      return (await q.query(`select 1 from runners where kind = 'remote' and state <> 'offline' limit 1`)).rowCount! > 0;
    },
    /**
     * Registers (or re-registers) a runner by name; a drained runner stays draining. A name stays with the
     * token (and kind) that registered it: null when another holds it (the conflict is decided here, under
     * the row's lock, so two tokens registering one name at once cannot both get it).
     */
    async upsertRunner(
      q: Queryable,
      r: {
        name: string;
        tokenId: string | null;
        kind: 'local' | 'remote';
        address: string | null;
        labels: Record<string, string>;
        version: string | null;
        capacity: number;
        reportedCapacity: number | null;
        sharedStorage: boolean;
        serveId: string;
        relayUrl: string | null;
      },
    ): Promise<RunnerRow | null> {
      const { rows } = await q.query<{ id: string }>(
        `insert into runners (name, token_id, kind, address, labels, version, capacity, reported_capacity, shared_storage, serve_id, relay_url, state, connected_at, heartbeat_at)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'active', now(), now())
         on conflict (name) do update set address = excluded.address, labels = excluded.labels,
           version = excluded.version, capacity = excluded.capacity, reported_capacity = excluded.reported_capacity, shared_storage = excluded.shared_storage,
           serve_id = excluded.serve_id, relay_url = excluded.relay_url, connected_at = now(), heartbeat_at = now(),
           state = case when runners.state = 'draining' then 'draining' else 'active' end
           where runners.token_id is not distinct from excluded.token_id and runners.kind = excluded.kind
         returning id`,
        [r.name, r.tokenId, r.kind, r.address, JSON.stringify(r.labels), r.version, r.capacity, r.reportedCapacity, r.sharedStorage, r.serveId, r.relayUrl],
      );
      return rows[0] ? this.runnerById(q, rows[0].id) : null;
    },
    /**
     * Records a heartbeat: the figures, the capacity the runner reports capped at its token's ceiling, and
     * that it is alive (lost -> active). Answers what it was before (for the capacity's news), or null.
     */
    async heartbeat(
      q: Queryable,
      id: string,
      f: { resident: number; busy: number; reported: number },
    ): Promise<{ state: RunnerState; sharedStorage: boolean; capacity: number; previousReported: number | null; ceiling: number | null; notedAt: Date | null; now: Date } | null> {
      return (
        (
          await q.query<{ state: RunnerState; sharedStorage: boolean; capacity: number; previousReported: number | null; ceiling: number | null; notedAt: Date | null; now: Date }>(
            `with before as (
               select r.id, r.reported_capacity, r.capacity_noted_at, t.max_capacity
                 from runners r left join runner_tokens t on t.id = r.token_id where r.id = $1
             )
             update runners r set heartbeat_at = now(), resident = $2, busy = $3, reported_capacity = $4,
               capacity = least($4, coalesce(before.max_capacity, $4)),
               state = case when r.state = 'lost' then 'active' else r.state end
             from before where r.id = before.id
             returning r.state, r.shared_storage as "sharedStorage", r.capacity, before.reported_capacity as "previousReported",
               before.max_capacity as ceiling, before.capacity_noted_at as "notedAt", now() as now`,
            [id, f.resident, f.busy, f.reported],
          )
        ).rows[0] ?? null
      );
    },
    /** Marks a capacity jump noted now, unless one was noted within `everyMs` (by any process): true if this call noted it. */
    async noteCapacity(q: Queryable, id: string, everyMs: number): Promise<boolean> {
      const r = await q.query(
        `update runners set capacity_noted_at = now() where id = $1 and (capacity_noted_at is null or capacity_noted_at < now() - make_interval(secs => $2::float8 / 1000))`,
        [id, everyMs],
      );
      return (r.rowCount ?? 0) > 0;
    },
    async disconnected(q: Queryable, id: string, serveId: string): Promise<void> {
      await q.query(`update runners set serve_id = null, relay_url = null where id = $1 and serve_id = $2`, [id, serveId]);
    },
    async setState(q: Queryable, id: string, state: RunnerState): Promise<void> {
      await q.query(`update runners set state = $2 where id = $1`, [id, state]);
    },
    /**
     * Marks lost the remote runners not heard from for `timeoutMs` (by the database's clock) before `at`
     * (default: now); each is returned once: the update decides.
     */
    async markLost(q: Queryable, timeoutMs: number, at: Date | null = null): Promise<Array<{ id: string; name: string; lostAt: Date }>> {
      return (
        await q.query<{ id: string; name: string; lostAt: Date }>(
          `update runners set state = 'lost', serve_id = null, relay_url = null
           where kind = 'remote' and state in ('active', 'draining')
             and (heartbeat_at is null or heartbeat_at < coalesce($2::timestamptz, now()) - make_interval(secs => $1::float8 / 1000))
           returning id, name, now() as "lostAt"`,
          [timeoutMs, at],
        )
      ).rows;
    },
    async deleteRunner(q: Queryable, id: string): Promise<void> {
      await q.query(`delete from runners where id = $1`, [id]);
    },
    async relayUrlOf(q: Queryable, id: string): Promise<string | null> {
      return (await q.query<{ relayUrl: string | null }>(`select relay_url as "relayUrl" from runners where id = $1`, [id])).rows[0]?.relayUrl ?? null;
    },

    /**
     * The user's placement, locked for this transaction: placing is serialised per user (the advisory
     * lock also covers a user not placed yet, whose row does not exist to be locked).
     */
    async lockPlacement(q: Queryable, userId: string): Promise<PlacementRow | null> {
      await q.query(`select pg_advisory_xact_lock(hashtext('runtime_placement:' || $1::text))`, [userId]);
      return (await q.query<PlacementRow>(`select ${PLACEMENT} from runtime_placements where user_id = $1 for update`, [userId])).rows[0] ?? null;
    },
    /**
     * Serialises choosing a runner across processes, so two placements at once do not both count the same
     * free room. Taken after a user's lock (the same order everywhere), only when a new runner is chosen.
     */
    async lockChoice(q: Queryable): Promise<void> {
      await q.query(`select pg_advisory_xact_lock(hashtext('runtime_placement:choose'))`);
    },
    async placement(q: Queryable, userId: string): Promise<PlacementRow | null> {
      return (await q.query<PlacementRow>(`select ${PLACEMENT} from runtime_placements where user_id = $1`, [userId])).rows[0] ?? null;
    },
    /** A new fence, taken ahead of the placement it will be (a drain marks the copy it makes with it first). */
    async nextFence(q: Queryable): Promise<number> {
      return (await q.query<{ fence: number }>(`select nextval('runtime_placement_fence')::float8 as fence`)).rows[0].fence;
    },
    /**
     * Places (or moves) the user on a runner under a new fence (`fence`: one taken with nextFence, else the
     * next one). `filesFence`: which copy of their files is current ('new': the one this placement makes);
     * `movedIntact`: a drain brought their files along.
     */
    async setPlacement(
      q: Queryable,
      p: { userId: string; tenantId: string; runnerId: string; storage: 'local' | 'shared'; fence?: number; filesFence: number | 'new'; movedIntact?: boolean },
    ): Promise<PlacementRow> {
      return (
        await q.query<PlacementRow>(
          `with f as (select coalesce($6::bigint, nextval('runtime_placement_fence')) as fence)
           insert into runtime_placements (user_id, tenant_id, runner_id, fence, storage, placed_at, files_fence, moved_intact)
           select $1, $2, $3, f.fence, $4, now(), coalesce($7::bigint, f.fence), $5 from f
           on conflict (user_id) do update set tenant_id = excluded.tenant_id, runner_id = excluded.runner_id, fence = excluded.fence,
             storage = excluded.storage, placed_at = now(), files_fence = excluded.files_fence, moved_intact = excluded.moved_intact
           returning ${PLACEMENT}`,
          [p.userId, p.tenantId, p.runnerId, p.storage, p.movedIntact === true, p.fence ?? null, p.filesFence === 'new' ? null : p.filesFence],
        )
      ).rows[0];
    },
    /** Whether the user's placement under `fence` was moved intact and not told yet; true once (this call tells). */
    async takeMovedIntact(q: Queryable, userId: string, fence: number): Promise<boolean> {
      const r = await q.query(`update runtime_placements set moved_intact = false where user_id = $1 and fence = $2 and moved_intact`, [userId, fence]);
      return (r.rowCount ?? 0) > 0;
    },
    /** The placements of these users (their runner and storage), for a runner telling which copies it keeps. */
    async placementsOfUsers(q: Queryable, userIds: string[]): Promise<PlacementRow[]> {
      if (!userIds.length) return [];
      return (await q.query<PlacementRow>(`select ${PLACEMENT} from runtime_placements where user_id = any($1::uuid[])`, [userIds])).rows;
    },
    async placementsOf(q: Queryable, runnerId: string): Promise<PlacementRow[]> {
      return (await q.query<PlacementRow>(`select ${PLACEMENT} from runtime_placements where runner_id = $1 order by placed_at`, [runnerId])).rows;
    },
    async dropPlacementsOf(q: Queryable, runnerId: string): Promise<void> {
      await q.query(`delete from runtime_placements where runner_id = $1`, [runnerId]);
    },
  };
}

export type RunnersRepo = ReturnType<typeof createRunnersRepo>;
