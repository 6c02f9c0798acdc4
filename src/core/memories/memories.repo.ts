import type { Queryable } from '../../db/database.js';
import { isUuid } from '../../lib/ids.js';
import { queryBits, vectorExpression, vectorLiteral } from '../embeddings/model-key.js';
import { RRF_K, shortlistSize, type MemoryKind, type MemorySource, type MemoryStatus, type MemoryVisibility } from './memory-fns.js';

/** A memory still lacking a vector of the current model. */
export interface MemoryToEmbed {
  id: string;
  userId: string;
  content: string;
}

export interface MemoryRow {
  id: string;
  tenantId: string;
  userId: string;
  authorHandle: string;
  kind: MemoryKind;
  content: string;
  visibility: MemoryVisibility;
  status: MemoryStatus;
  source: MemorySource;
  sessionId: string | null;
  messageId: string | null;
  /** The instruction signals its normalised text tripped when it was written (memory-fns.ts). */
  signals: string[];
  /** When its author released it (null: never quarantined, or not released). */
  releasedAt: Date | null;
  /** Embedded with the tenant's current embedder (an embedding of an earlier model does not count). */
  embedded: boolean;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * Who is looking, with the three read permissions that decide what they see. Always a user of one tenant:
 * memories belong to people, and nothing crosses tenants.
 */
export interface Viewer {
  tenantId: string;
  userId: string;
  readOwn: boolean;
  readTeam: boolean;
  readOrg: boolean;
}

export interface MemoryFilter {
  kind?: MemoryKind;
  visibility?: MemoryVisibility;
  /** Only active memories (what the agent may see); default: active and quarantined. */
  activeOnly?: boolean;
  /** Only the viewer's own (the recent-preferences fallback of a turn: nobody else's words by default). */
  ownOnly?: boolean;
}

export interface SearchInput extends MemoryFilter {
  text: string;
  /**
   * `all`: websearch syntax, every word must match (what a person typing a search expects);
   * `any`: a memory matching any of the words counts, more matches rank higher (a prompt is not a query).
   */
  match: 'all' | 'any';
  limit: number;
  /** How many candidates each arm ranks before fusion. */
  candidates: number;
  /**
   * The query's embedding: present, the search is hybrid. `codeScan: 'off'` ranks every visible vector
   * by its exact distance, no short list by codes (slow: the reference the memories benchmark measures
   * recall against; in a transaction, for its SET LOCAL).
   */
  vector?: { modelKey: string; values: number[]; codeScan?: 'off' };
  /** With a vector: rank by it alone (a turn's prompt, whose words ORed match thousands of rows). */
  vectorOnly?: boolean;
}

const COLS = `m.id, m.tenant_id as "tenantId", m.user_id as "userId", u.handle as "authorHandle", m.kind, m.content, m.visibility, m.status, m.source,
  m.session_id as "sessionId", m.message_id as "messageId", m.signals, m.released_at as "releasedAt",
  (m.embedding is not null and m.embedding_model is not distinct from (select e.model_key from memory_embedders e where e.tenant_id = m.tenant_id)) as embedded,
  m.created_at as "createdAt", m.updated_at as "updatedAt"`;

/** Numbered query parameters for statements assembled from fragments. */
class Params {
  readonly values: unknown[] = [];
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

/**
 * THE visibility rule, the only place it is written; every read, search, update and delete of memories
 * goes through it. A viewer sees, within their own tenant only:
 * - their own memories, at any visibility, when they hold memory.read_own;
 * - `team` (and `org`) memories of authors who share at least one team with them, when they hold
 *   memory.read_team (widening a memory from team to org never hides it from the teammates who saw it);
 * - `org` memories of anyone in the tenant, when they hold memory.read_org.
 * One branch per rule, each a plain index range (the vector arm reads them as a UNION of index-only
 * scans of the covering code indexes). The branches may overlap (an own org memory is in two), so a
 * reader that unions them must drop duplicates; making them disjoint instead would cost a filter on
 * every row of the widest branch (an admin's org branch visited a quarter more rows only to reject
 * them). With memory.read_org the team branch needs only `team` memories: the org branch has the rest.
 * The permissions are inlined as constants (they are booleans, never caller text), so only the
 * branches a viewer can use exist; the teammates are computed once per statement (an InitPlan), not per
 * row. Without a tenant condition: callers add it.
 */
function visibilityBranches(m: string, v: Viewer, p: Params, tenant: string): string[] {
  const branches: string[] = [];
  // Added only when a branch uses it: PostgreSQL refuses a parameter no clause mentions.
  const user = v.readOwn || v.readTeam ? p.add(v.userId) : '';
  if (v.readOwn) branches.push(`${m}.user_id = ${user}`);
  if (v.readTeam) {
    const teammates = `array(
      select theirs.user_id from team_members mine join team_members theirs on theirs.team_id = mine.team_id and theirs.tenant_id = mine.tenant_id
       where mine.tenant_id = ${tenant} and mine.user_id = ${user})`;
    branches.push(`${m}.visibility ${v.readOrg ? `= 'team'` : `in ('team', 'org')`} and ${m}.user_id = any (${teammates})`);
  }
  if (v.readOrg) branches.push(`${m}.visibility = 'org'`);
  return branches;
}

/** The visibility rule as one condition (with the tenant's). */
function visibleTo(m: string, v: Viewer, p: Params): string {
  const tenant = p.add(v.tenantId);
  const branches = visibilityBranches(m, v, p, tenant);
  return `(${m}.tenant_id = ${tenant} and ${branches.length ? `(${branches.map((b) => `(${b})`).join(' or ')})` : 'false'})`;
}

function filters(m: string, f: MemoryFilter, p: Params, v: Viewer): string {
  const out: string[] = [];
  if (f.ownOnly) out.push(`${m}.user_id = ${p.add(v.userId)}`);
  if (f.kind) out.push(`${m}.kind = ${p.add(f.kind)}`);
  if (f.visibility) out.push(`${m}.visibility = ${p.add(f.visibility)}`);
  if (f.activeOnly) out.push(`${m}.status = 'active'`);
  return out.length ? ` and ${out.join(' and ')}` : '';
}

export function createMemoriesRepo() {
  return {
    async insert(
      tx: Queryable,
      r: {
        tenantId: string;
        userId: string;
        kind: MemoryKind;
        content: string;
        visibility: MemoryVisibility;
        status: MemoryStatus;
        source: MemorySource;
        signals?: string[];
        sessionId?: string | null;
        messageId?: string | null;
      },
    ): Promise<MemoryRow> {
      const { rows } = await tx.query<MemoryRow>(
        `with m as (
           insert into memories (tenant_id, user_id, kind, content, visibility, status, source, session_id, message_id, signals)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) returning *)
         select ${COLS} from m join users u on u.id = m.user_id`,
        [r.tenantId, r.userId, r.kind, r.content, r.visibility, r.status, r.source, r.sessionId ?? null, r.messageId ?? null, r.signals ?? []],
      );
      return rows[0];
    },

    /** One memory the viewer may see; null when there is none or it is not theirs to see. */
    async findVisible(q: Queryable, v: Viewer, id: string, options: { lock?: boolean } = {}): Promise<MemoryRow | null> {
      const p = new Params();
      const { rows } = await q.query<MemoryRow>(
        `select ${COLS} from memories m join users u on u.id = m.user_id where m.id = ${p.add(id)} and ${visibleTo('m', v, p)}${options.lock ? ' for update of m' : ''}`,
        p.values,
      );
      return rows[0] ?? null;
    },

    /** The viewer's visible memories, newest first. */
    async list(q: Queryable, v: Viewer, f: MemoryFilter & { limit: number }): Promise<MemoryRow[]> {
      const p = new Params();
      const where = `${visibleTo('m', v, p)}${filters('m', f, p, v)}`;
      const { rows } = await q.query<MemoryRow>(
        `select ${COLS} from memories m join users u on u.id = m.user_id where ${where} order by m.created_at desc, m.id limit ${p.add(f.limit)}`,
        p.values,
      );
      return rows;
    },

    /**
     * Search in ONE statement, visibility in its WHERE: a full-text arm (the generated `search` tsvector,
     * GIN) and, when a query vector is given, a cosine arm over the memories embedded with that vector's
     * model, fused by reciprocal rank fusion (score = Σ 1 / (RRF_K + rank)). Memories not embedded yet
     * still come through the full-text arm.
     *
     * The cosine arm works in two steps (migrations/0010_memory_vector_codes.sql): it short-lists the
     * memories whose binary codes are nearest the query's (Hamming distance), then ranks the short list
     * by the exact cosine distance of the stored vectors. The codes are those of every memory the viewer
     * may see, one UNION ALL branch per visibility branch, each an index-only scan of a covering code
     * index: exact over the visible set, so a filter matching 1 % of the rows still fills the limit, and
     * nothing approximate decides what a viewer is shown. Its cost grows with what the viewer sees
     * (~0.4 µs a code). With codeScan `off` every visible vector is ranked exactly, no short list: the
     * reference the memories benchmark measures recall against (slow; JIT is off for it, since its cost
     * estimate triggers JIT and compiling takes longer than the search).
     */
    async search(q: Queryable, v: Viewer, s: SearchInput): Promise<Array<MemoryRow & { score: number }>> {
      const p = new Params();
      const text = p.add(s.text);
      const tsquery =
        s.match === 'all'
          ? `websearch_to_tsquery('english', ${text})`
          : // plainto_tsquery ANDs the words; OR them instead. Its lexemes are quoted, so only the
            // operators are replaced.
            `replace(plainto_tsquery('english', ${text})::text, ' & ', ' | ')::tsquery`;
      const k = p.add(s.candidates);
      const wordsArm = !(s.vector && s.vectorOnly);
      // Built only when used: PostgreSQL refuses a parameter no clause mentions.
      const ftWhere = wordsArm ? `f.search @@ tsq.query and ${visibleTo('f', v, p)}${filters('f', s, p, v)}` : 'false';
      let vectorArm = '';
      if (s.vector) {
        const dims = s.vector.values.length;
        const query = `${p.add(vectorLiteral(s.vector.values))}::vector(${dims})`;
        const tenant = p.add(v.tenantId);
        const model = p.add(s.vector.modelKey);
        const branches = visibilityBranches('e', v, p, tenant).map(
          (b) => `select e.id, e.embedding_bits <~> ${queryBits(dims, query)} as h from memories e
             where e.tenant_id = ${tenant} and e.embedding_model = ${model} and e.embedding_bits is not null and ${b}${filters('e', s, p, v)}`,
        );
        const nearestCodes = !branches.length
          ? `select null::uuid as id where false`
          : // The branches overlap (visibilityBranches): a memory in two comes twice. Dropped after the
            // short list's top-N (a sort with DISTINCT would sort every visible code in full), so a
            // short list holds a few less distinct memories than its size when the viewer's own
            // shared memories are near the query.
            `select distinct id from (select id from (${branches.join('\n union all ')}) coded${s.vector.codeScan === 'off' ? '' : ` order by h limit ${p.add(shortlistSize(s.candidates))}`}) short`;
        vectorArm = `,
          vec as materialized (
            select id, row_number() over (order by distance, id) as rank from (
              select m.id, ${vectorExpression(dims, 'm.embedding')} <=> ${query} as distance
                from (${nearestCodes}) near join memories m on m.id = near.id and m.tenant_id = ${tenant}
               order by distance, m.id
               limit ${k}) nearest)`;
        if (s.vector.codeScan === 'off') await q.query(`select set_config('jit', 'off', true)`);
      }
      const sql = `with tsq as (select ${tsquery} as query),
          ft as materialized (
            select id, row_number() over (order by rank desc, created_at desc, id) as rank from (
              select f.id, f.created_at, ts_rank_cd(f.search, tsq.query) as rank
                from memories f, tsq
               where ${ftWhere}
               order by rank desc, f.created_at desc
               limit ${k}) matched)${vectorArm},
          fused as (
            select id, sum(1.0 / (${RRF_K} + rank))::float8 as score
              from (select id, rank from ft${s.vector ? ' union all select id, rank from vec' : ''}) arms
             group by id)
        select ${COLS}, fused.score
          from fused join memories m on m.id = fused.id join users u on u.id = m.user_id
         order by fused.score desc, m.created_at desc, m.id
         limit ${p.add(s.limit)}`;
      const { rows } = await q.query<MemoryRow & { score: number }>(sql, p.values);
      return rows;
    },

    async updateVisibility(tx: Queryable, tenantId: string, id: string, visibility: MemoryVisibility): Promise<MemoryRow | null> {
      const { rows } = await tx.query<MemoryRow>(
        `with m as (update memories set visibility = $3, updated_at = now() where id = $1 and tenant_id = $2 returning *)
         select ${COLS} from m join users u on u.id = m.user_id`,
        [id, tenantId, visibility],
      );
      return rows[0] ?? null;
    },

    async release(tx: Queryable, tenantId: string, id: string): Promise<MemoryRow | null> {
      const { rows } = await tx.query<MemoryRow>(
        `with m as (update memories set status = 'active', released_at = now(), updated_at = now() where id = $1 and tenant_id = $2 returning *)
         select ${COLS} from m join users u on u.id = m.user_id`,
        [id, tenantId],
      );
      return rows[0] ?? null;
    },

    /**
     * What the write limits need to know about a user, read under a per-user lock held to the end of the
     * caller's transaction, so writes of one user (from any process on this database) are counted one
     * after the other: how many memories they keep, and, with `rateWindow`, how many they wrote outside
     * the agent (the audit log's `memory.create` entries: a memory deleted since still counts, and the log
     * is append-only) in the last minute, with the oldest's age (`now()`, stable, so the window is an
     * index range of the user's entries; a volatile clock would make it a filter over all of them). On the embedded database transactions
     * run one at a time, so the lock has nothing to exclude.
     */
    async lockedWriteState(tx: Queryable, tenantId: string, userId: string, options: { rateWindow: boolean }): Promise<{ stored: number; recent?: number; oldestAgeMs?: number | null }> {
      await tx.query(`select pg_advisory_xact_lock(hashtextextended('memories:' || $1::text, 0))`, [userId]);
      const stored = `(select count(*)::int from memories where tenant_id = $1 and user_id = $2) as stored`;
      if (!options.rateWindow) return (await tx.query<{ stored: number }>(`select ${stored}`, [tenantId, userId])).rows[0];
      const { rows } = await tx.query<{ stored: number; recent: number; oldestAgeMs: number | null }>(
        `select ${stored}, count(*)::int as recent, (extract(epoch from now() - min(ts)) * 1000)::float8 as "oldestAgeMs"
           from audit_log
          where tenant_id = $1 and user_id = $2 and ts > now() - interval '60 seconds'
            and action = 'memory.create' and channel <> 'agent'`,
        [tenantId, userId],
      );
      return rows[0];
    },

    /** The tenant holds every memory an agent saves until its person releases it (settings.memory). */
    async agentSavesNeedRelease(q: Queryable, tenantId: string): Promise<boolean> {
      const { rows } = await q.query<{ hold: boolean | null }>(`select (settings -> 'memory' ->> 'agentSavesNeedRelease')::boolean as hold from tenants where id = $1`, [tenantId]);
      return rows[0]?.hold === true;
    },

    /** False when it was gone already (deleted meanwhile). */
    async remove(tx: Queryable, tenantId: string, id: string): Promise<boolean> {
      const { rowCount } = await tx.query(`delete from memories where id = $1 and tenant_id = $2`, [id, tenantId]);
      return (rowCount ?? 0) > 0;
    },

    /**
     * The id of one of this user's agent sessions, named by our id or by the runtime's (`ses_…`, what
     * the runtime itself knows); null when it is not theirs. Provenance must point at the user's own session.
     */
    async ownSession(q: Queryable, tenantId: string, userId: string, ref: string): Promise<string | null> {
      const { rows } = await q.query<{ id: string }>(
        isUuid(ref)
          ? `select id from agent_sessions where id = $1 and tenant_id = $2 and owner_id = $3`
          : `select id from agent_sessions where upstream_id = $1 and tenant_id = $2 and owner_id = $3`,
        [ref, tenantId, userId],
      );
      return rows[0]?.id ?? null;
    },
    /** Every memory a person wrote, newest first (their data export). */
    async ofAuthor(q: Queryable, tenantId: string, userId: string): Promise<MemoryRow[]> {
      const { rows } = await q.query<MemoryRow>(`select ${COLS} from memories m join users u on u.id = m.user_id where m.tenant_id = $1 and m.user_id = $2 order by m.created_at desc, m.id`, [tenantId, userId]);
      return rows;
    },
    /** Removes a person's memories of these visibilities (their erasure); how many went. */
    async removeOfAuthor(q: Queryable, tenantId: string, userId: string, visibilities: MemoryVisibility[]): Promise<number> {
      const { rowCount } = await q.query(`delete from memories where tenant_id = $1 and user_id = $2 and visibility = any($3::text[])`, [tenantId, userId, visibilities]);
      return rowCount ?? 0;
    },
    /** Gives a person's remaining memories to another author (an erased person's shared ones, to their placeholder); how many. */
    async reassignAuthor(q: Queryable, tenantId: string, from: string, to: string): Promise<number> {
      const { rowCount } = await q.query(`update memories set user_id = $3, updated_at = now() where tenant_id = $1 and user_id = $2`, [tenantId, from, to]);
      return rowCount ?? 0;
    },

    /**
     * Up to `limit` of the tenant's memories lacking a vector of `modelKey`, oldest first: those with
     * none first (the partial index memories_unembedded_idx finds them), then those of another model.
     * `skip`: ids already being embedded (the batch in flight), left out.
     */
    async pending(q: Queryable, tenantId: string, modelKey: string, limit: number, skip: string[] = []): Promise<MemoryToEmbed[]> {
      const cols = `id, user_id as "userId", content`;
      const missing = (
        await q.query<MemoryToEmbed>(`select ${cols} from memories where tenant_id = $1 and embedding is null and id <> all($3::uuid[]) order by created_at, id limit $2`, [
          tenantId,
          limit,
          skip,
        ])
      ).rows;
      if (missing.length >= limit) return missing;
      const other = await q.query<MemoryToEmbed>(
        `select ${cols} from memories where tenant_id = $1 and embedding is not null and embedding_model is distinct from $2 and id <> all($4::uuid[]) order by created_at, id limit $3`,
        [tenantId, modelKey, limit - missing.length, skip],
      );
      return [...missing, ...other.rows];
    },
    /** How many of the tenant's memories lack a vector of `modelKey`. */
    async countPending(q: Queryable, tenantId: string, modelKey: string): Promise<number> {
      const { rows } = await q.query<{ n: number }>(`select count(*)::int as n from memories where tenant_id = $1 and embedding_model is distinct from $2`, [tenantId, modelKey]);
      return rows[0].n;
    },
    async countEmbedded(q: Queryable, tenantId: string, modelKey: string): Promise<number> {
      const { rows } = await q.query<{ n: number }>(`select count(*)::int as n from memories where tenant_id = $1 and embedding_model = $2`, [tenantId, modelKey]);
      return rows[0].n;
    },
    /** One memory, if it still lacks a vector of `modelKey`. */
    async toEmbed(q: Queryable, tenantId: string, memoryId: string, modelKey: string): Promise<MemoryToEmbed | null> {
      const { rows } = await q.query<MemoryToEmbed>(
        `select id, user_id as "userId", content from memories where tenant_id = $1 and id = $2 and embedding_model is distinct from $3`,
        [tenantId, memoryId, modelKey],
      );
      return rows[0] ?? null;
    },
    /**
     * Stores vectors of `modelKey`, only into rows that still lack one: a batch written twice (a retried
     * job, an embed-memory job racing the backfill) changes nothing the second time. Returns how many
     * rows it wrote.
     */
    async store(q: Queryable, tenantId: string, modelKey: string, items: Array<{ id: string; vector: number[] }>): Promise<number> {
      if (!items.length) return 0;
      const { rowCount } = await q.query(
        `update memories m set embedding = v.e::vector, embedding_model = $2, embedded_at = now()
           from unnest($3::uuid[], $4::text[]) as v(id, e)
          where m.id = v.id and m.tenant_id = $1 and m.embedding_model is distinct from $2`,
        [tenantId, modelKey, items.map((i) => i.id), items.map((i) => vectorLiteral(i.vector))],
      );
      return rowCount ?? 0;
    },
  };
}

export type MemoriesRepo = ReturnType<typeof createMemoriesRepo>;
