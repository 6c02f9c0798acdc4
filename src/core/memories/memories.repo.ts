import type { Queryable, Tx } from '../../db/database.js';
import { isUuid } from '../../lib/ids.js';
import { embeddingExpression, sqlLiteral, vectorLiteral, vectorType } from '../embeddings/model-key.js';
import { RRF_K, type MemoryKind, type MemorySource, type MemoryStatus, type MemoryVisibility } from './memory-fns.js';

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
  /** The query's embedding: present, the search is hybrid (needs a transaction for its SET LOCALs). */
  vector?: { modelKey: string; values: number[] };
  /** With a vector: rank by it alone (a turn's prompt, whose words ORed match thousands of rows). */
  vectorOnly?: boolean;
}

const COLS = `m.id, m.tenant_id as "tenantId", m.user_id as "userId", u.handle as "authorHandle", m.kind, m.content, m.visibility, m.status, m.source,
  m.session_id as "sessionId", m.message_id as "messageId",
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
 * The permissions are inlined as constants (they are booleans, never caller text), so the planner drops
 * the branches a viewer cannot use; the teammates are computed once per statement (an InitPlan), not
 * per row, which keeps the filter cheap inside an index scan.
 */
function visibleTo(m: string, v: Viewer, p: Params): string {
  const tenant = p.add(v.tenantId);
  // Added only when used: PostgreSQL refuses a parameter no clause mentions (its type is unknown).
  let userParam: string | undefined;
  const user = () => (userParam ??= p.add(v.userId));
  const branches: string[] = [];
  if (v.readOwn) branches.push(`${m}.user_id = ${user()}`);
  if (v.readTeam) {
    branches.push(`(${m}.visibility in ('team', 'org') and ${m}.user_id = any (array(
      select theirs.user_id from team_members mine join team_members theirs on theirs.team_id = mine.team_id and theirs.tenant_id = mine.tenant_id
       where mine.tenant_id = ${tenant} and mine.user_id = ${user()})))`);
  }
  if (v.readOrg) branches.push(`${m}.visibility = 'org'`);
  return `(${m}.tenant_id = ${tenant} and ${branches.length ? `(${branches.join(' or ')})` : 'false'})`;
}

function filters(m: string, f: MemoryFilter, p: Params): string {
  const out: string[] = [];
  if (f.kind) out.push(`${m}.kind = ${p.add(f.kind)}`);
  if (f.visibility) out.push(`${m}.visibility = ${p.add(f.visibility)}`);
  if (f.activeOnly) out.push(`${m}.status = 'active'`);
  return out.length ? ` and ${out.join(' and ')}` : '';
}

export function createMemoriesRepo() {
  return {
    async insert(
      tx: Queryable,
      r: { tenantId: string; userId: string; kind: MemoryKind; content: string; visibility: MemoryVisibility; status: MemoryStatus; source: MemorySource; sessionId?: string | null; messageId?: string | null },
    ): Promise<MemoryRow> {
      const { rows } = await tx.query<MemoryRow>(
        `with m as (
           insert into memories (tenant_id, user_id, kind, content, visibility, status, source, session_id, message_id)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9) returning *)
         select ${COLS} from m join users u on u.id = m.user_id`,
        [r.tenantId, r.userId, r.kind, r.content, r.visibility, r.status, r.source, r.sessionId ?? null, r.messageId ?? null],
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
      const where = `${visibleTo('m', v, p)}${filters('m', f, p)}`;
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
     * The cosine arm is written to use the model's partial HNSW index
     * (`(embedding::vector(N)) vector_cosine_ops ... where embedding_model = '<key>'`): the cast and the
     * key are inlined as constants, because a partial index is only chosen when the planner can prove
     * its predicate, which it cannot do for a parameter. With pgvector 0.8's iterative scans
     * (`hnsw.iterative_scan = relaxed_order`) a filter that rejects most rows (visibility, kind) makes the
     * index scan go on instead of returning short; relaxed order is re-sorted by distance in the outer
     * query. SET LOCAL, so the settings end with the transaction: on the embedded database every
     * connection shares one session, where a plain SET would leak to every other query.
     */
    async search(q: Queryable | Tx, v: Viewer, s: SearchInput): Promise<Array<MemoryRow & { score: number }>> {
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
      const ftWhere = wordsArm ? `f.search @@ tsq.query and ${visibleTo('f', v, p)}${filters('f', s, p)}` : 'false';
      let vectorArm = '';
      if (s.vector) {
        const dims = s.vector.values.length;
        const key = sqlLiteral(s.vector.modelKey);
        // The same expression and type as the key's index (embeddings/model-key.ts: halfvec above 2,000).
        const column = embeddingExpression(dims, 'e.embedding');
        const query = `${p.add(vectorLiteral(s.vector.values))}::${vectorType(dims)}`;
        const vecWhere = `${visibleTo('e', v, p)}${filters('e', s, p)}`;
        vectorArm = `,
          vec as materialized (
            select id, row_number() over (order by distance, id) as rank from (
              select e.id, ${column} <=> ${query} as distance
                from memories e
               where e.embedding_model = ${key} and ${vecWhere}
               order by ${column} <=> ${query}
               limit ${k}) nearest)`;
        await q.query(`select set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', $1, true)`, [String(Math.min(Math.max(s.candidates, 40), 1000))]);
      }
      const { rows } = await q.query<MemoryRow & { score: number }>(
        `with tsq as (select ${tsquery} as query),
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
         limit ${p.add(s.limit)}`,
        p.values,
      );
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
        `with m as (update memories set status = 'active', updated_at = now() where id = $1 and tenant_id = $2 returning *)
         select ${COLS} from m join users u on u.id = m.user_id`,
        [id, tenantId],
      );
      return rows[0] ?? null;
    },

    /** False when it was gone already (deleted meanwhile). */
    async remove(tx: Queryable, tenantId: string, id: string): Promise<boolean> {
      const { rowCount } = await tx.query(`delete from memories where id = $1 and tenant_id = $2`, [id, tenantId]);
      return (rowCount ?? 0) > 0;
    },

    /** Whether the tenant has an embedder: then every new memory gets an embedding job. */
    async hasEmbedder(q: Queryable, tenantId: string): Promise<boolean> {
      const { rowCount } = await q.query(`select 1 from memory_embedders where tenant_id = $1`, [tenantId]);
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
  };
}

export type MemoriesRepo = ReturnType<typeof createMemoriesRepo>;
