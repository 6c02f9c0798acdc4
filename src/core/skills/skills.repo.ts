import type { Queryable } from '../../db/database.js';
import { vectorLiteral } from '../embeddings/model-key.js';
import type { SkillFlag, SkillStatus, VersionStatus } from './skill-fns.js';

export type TrajectoryOutcome = 'success' | 'error' | 'rejected' | 'redone' | 'discarded';

export interface TrajectoryRow {
  id: string;
  tenantId: string;
  userId: string;
  sessionId: string;
  messageId: string;
  request: string;
  answer: string;
  tools: string[];
  toolGrams: string[];
  words: string[];
  outcome: TrajectoryOutcome;
  costUsd: number;
  skillId: string | null;
  proposalJob: string | null;
  createdAt: Date;
}

export interface SkillRow {
  id: string;
  tenantId: string;
  name: string;
  description: string;
  status: SkillStatus;
  version: number;
  promotedVersion: number | null;
  createdAt: Date;
  updatedAt: Date;
  promotedAt: Date | null;
  deprecatedAt: Date | null;
  /** The version waiting for review (the newest proposed one), if any. */
  pendingVersion: number | null;
  /** The description of the version agents load (null: none promoted). */
  promotedDescription: string | null;
}

export interface SkillVersionRow {
  version: number;
  status: VersionStatus;
  description: string;
  content: string;
  sourceTrajectories: string[];
  flags: SkillFlag[];
  reviewedBy: string | null;
  reviewedAt: Date | null;
  createdAt: Date;
}

const TRAJECTORY = `t.id, t.tenant_id as "tenantId", t.user_id as "userId", t.session_id as "sessionId", t.message_id as "messageId",
  t.request, t.answer, t.tools, t.tool_grams as "toolGrams", t.words, t.outcome, t.cost_usd::float8 as "costUsd",
  t.skill_id as "skillId", t.proposal_job as "proposalJob", t.created_at as "createdAt"`;

const SKILL = `s.id, s.tenant_id as "tenantId", s.name, s.description, s.status, s.version, s.promoted_version as "promotedVersion",
  s.created_at as "createdAt", s.updated_at as "updatedAt", s.promoted_at as "promotedAt", s.deprecated_at as "deprecatedAt",
  (select max(pv.version) from skill_versions pv where pv.skill_id = s.id and pv.status = 'proposed') as "pendingVersion",
  (select lv.description from skill_versions lv where lv.skill_id = s.id and lv.version = s.promoted_version) as "promotedDescription"`;

const VERSION = `version, status, description, content, source_trajectories as "sourceTrajectories", flags, reviewed_by as "reviewedBy",
  reviewed_at as "reviewedAt", created_at as "createdAt"`;

/** All SQL of learned skills and trajectories. Every statement names the tenant. */
export function createSkillsRepo() {
  return {
    /** One trajectory per turn (by its user message id): false when this turn was recorded already. */
    async insertTrajectory(
      q: Queryable,
      t: Omit<TrajectoryRow, 'id' | 'skillId' | 'proposalJob'> & { embedding: { modelKey: string; values: number[] } | null },
    ): Promise<string | null> {
      const { rows } = await q.query<{ id: string }>(
        `insert into trajectories (tenant_id, user_id, session_id, message_id, request, answer, tools, tool_grams, words, embedding, embedding_model, outcome, cost_usd, created_at)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::vector, $11, $12, $13, $14)
         on conflict (tenant_id, message_id) do nothing returning id`,
        [
          t.tenantId,
          t.userId,
          t.sessionId,
          t.messageId,
          t.request,
          t.answer,
          t.tools,
          t.toolGrams,
          t.words,
          t.embedding ? vectorLiteral(t.embedding.values) : null,
          t.embedding?.modelKey ?? null,
          t.outcome,
          t.costUsd,
          t.createdAt,
        ],
      );
      return rows[0]?.id ?? null;
    },

    /** The session's trajectory recorded before `before` (its previous turn), if any. */
    async previousInSession(q: Queryable, tenantId: string, sessionId: string, before: Date): Promise<TrajectoryRow | null> {
      const { rows } = await q.query<TrajectoryRow>(
        `select ${TRAJECTORY} from trajectories t where t.tenant_id = $1 and t.session_id = $2 and t.created_at < $3 order by t.created_at desc limit 1`,
        [tenantId, sessionId, before],
      );
      return rows[0] ?? null;
    },

    async setOutcome(q: Queryable, tenantId: string, id: string, outcome: TrajectoryOutcome): Promise<void> {
      await q.query(`update trajectories set outcome = $3 where id = $1 and tenant_id = $2`, [id, tenantId, outcome]);
    },

    /** The session's successful trajectories since `since` no longer count (the person deleted the session). */
    async discardSince(q: Queryable, tenantId: string, sessionId: string, since: Date): Promise<number> {
      const { rowCount } = await q.query(`update trajectories set outcome = 'discarded' where tenant_id = $1 and session_id = $2 and created_at >= $3 and outcome = 'success'`, [
        tenantId,
        sessionId,
        since,
      ]);
      return rowCount ?? 0;
    },

    /**
     * The tenant's successful trajectories sharing a tool 3-gram with `grams` (GIN), newest first, with
     * their cosine distance to `vector` when both were embedded with its model.
     */
    async candidates(
      q: Queryable,
      tenantId: string,
      exclude: string,
      grams: string[],
      vector: { modelKey: string; values: number[] } | null,
      limit: number,
    ): Promise<Array<Pick<TrajectoryRow, 'id' | 'userId' | 'sessionId' | 'words' | 'toolGrams' | 'skillId' | 'proposalJob'> & { distance: number | null }>> {
      const distance = vector ? `case when t.embedding_model = $5 then (t.embedding::vector(${vector.values.length})) <=> $6::vector(${vector.values.length}) end` : 'null::float8';
      const { rows } = await q.query(
        `select t.id, t.user_id as "userId", t.session_id as "sessionId", t.words, t.tool_grams as "toolGrams", t.skill_id as "skillId", t.proposal_job as "proposalJob", ${distance} as distance
           from trajectories t
          where t.tenant_id = $1 and t.outcome = 'success' and t.id <> $2 and t.tool_grams && $3::text[]
          order by t.created_at desc limit $4`,
        vector ? [tenantId, exclude, grams, limit, vector.modelKey, vectorLiteral(vector.values)] : [tenantId, exclude, grams, limit],
      );
      return rows as never;
    },

    async trajectory(q: Queryable, tenantId: string, id: string): Promise<(TrajectoryRow & { embedding: string | null; embeddingModel: string | null }) | null> {
      const { rows } = await q.query<TrajectoryRow & { embedding: string | null; embeddingModel: string | null }>(
        `select ${TRAJECTORY}, t.embedding::text as embedding, t.embedding_model as "embeddingModel" from trajectories t where t.id = $1 and t.tenant_id = $2`,
        [id, tenantId],
      );
      return rows[0] ?? null;
    },

    async trajectories(q: Queryable, tenantId: string, ids: string[]): Promise<TrajectoryRow[]> {
      const { rows } = await q.query<TrajectoryRow>(`select ${TRAJECTORY} from trajectories t where t.tenant_id = $1 and t.id = any($2::uuid[]) order by t.created_at`, [tenantId, ids]);
      return rows;
    },

    /**
     * Claims trajectories for one proposal job: only those not yet covered by a skill or claimed by
     * another job. Returns the ids it claimed.
     */
    async claim(q: Queryable, tenantId: string, ids: string[], jobId: string): Promise<string[]> {
      const { rows } = await q.query<{ id: string }>(
        `update trajectories set proposal_job = $3 where tenant_id = $1 and id = any($2::uuid[]) and skill_id is null and proposal_job is null returning id`,
        [tenantId, ids, jobId],
      );
      return rows.map((r) => r.id);
    },

    /** Lets trajectories go after a proposal from them failed: a later similar success may use them again. */
    async releaseClaim(q: Queryable, tenantId: string, ids: string[]): Promise<void> {
      await q.query(`update trajectories set proposal_job = null where tenant_id = $1 and id = any($2::uuid[]) and skill_id is null`, [tenantId, ids]);
    },

    async setSkill(q: Queryable, tenantId: string, ids: string[], skillId: string): Promise<void> {
      await q.query(`update trajectories set skill_id = $3 where tenant_id = $1 and id = any($2::uuid[])`, [tenantId, ids, skillId]);
    },

    async listSkills(q: Queryable, tenantId: string, status?: SkillStatus): Promise<SkillRow[]> {
      const { rows } = await q.query<SkillRow>(`select ${SKILL} from skills s where s.tenant_id = $1 and ($2::text is null or s.status = $2) order by s.created_at desc, s.id`, [
        tenantId,
        status ?? null,
      ]);
      return rows;
    },

    async skill(q: Queryable, tenantId: string, id: string, options: { lock?: boolean } = {}): Promise<SkillRow | null> {
      const { rows } = await q.query<SkillRow>(`select ${SKILL} from skills s where s.id = $1 and s.tenant_id = $2${options.lock ? ' for update' : ''}`, [id, tenantId]);
      return rows[0] ?? null;
    },

    /** The tenant of a skill, for the operator who names a skill by its id alone (aws skill show|promote|deprecate). */
    async tenantOfSkill(q: Queryable, id: string): Promise<string | null> {
      const { rows } = await q.query<{ tenantId: string }>(`select tenant_id as "tenantId" from skills where id = $1`, [id]);
      return rows[0]?.tenantId ?? null;
    },

    async skillByName(q: Queryable, tenantId: string, name: string): Promise<SkillRow | null> {
      const { rows } = await q.query<SkillRow>(`select ${SKILL} from skills s where s.tenant_id = $1 and s.name = $2`, [tenantId, name]);
      return rows[0] ?? null;
    },

    /** A new skill (proposed) with its first version, waiting for review. */
    async insertSkill(
      q: Queryable,
      s: { tenantId: string; name: string; description: string; content: string; sources: string[]; flags: SkillFlag[]; at: Date },
    ): Promise<{ id: string }> {
      const { rows } = await q.query<{ id: string }>(`insert into skills (tenant_id, name, description, created_at, updated_at) values ($1, $2, $3, $4, $4) returning id`, [
        s.tenantId,
        s.name,
        s.description,
        s.at,
      ]);
      await q.query(
        `insert into skill_versions (skill_id, tenant_id, version, description, content, source_trajectories, flags, created_at) values ($1, $2, 1, $3, $4, $5, $6::jsonb, $7)`,
        [rows[0].id, s.tenantId, s.description, s.content, s.sources, JSON.stringify(s.flags), s.at],
      );
      return rows[0];
    },

    /**
     * The next version of a skill, waiting for review beside the promoted one (the skill keeps its status:
     * agents go on loading the promoted version). A draft still waiting is replaced by it (retired). A
     * deprecated skill's name comes back as a proposal.
     */
    async addVersion(
      q: Queryable,
      s: { tenantId: string; skillId: string; description: string; content: string; sources: string[]; flags: SkillFlag[]; at: Date },
    ): Promise<number> {
      await q.query(`update skill_versions set status = 'retired' where skill_id = $1 and tenant_id = $2 and status = 'proposed'`, [s.skillId, s.tenantId]);
      const { rows } = await q.query<{ version: number }>(
        `update skills set version = version + 1, description = $3, updated_at = $4, status = case when status = 'deprecated' then 'proposed' else status end
          where id = $1 and tenant_id = $2 returning version`,
        [s.skillId, s.tenantId, s.description, s.at],
      );
      const version = rows[0].version;
      await q.query(
        `insert into skill_versions (skill_id, tenant_id, version, description, content, source_trajectories, flags, created_at) values ($1, $2, $3, $4, $5, $6, $7::jsonb, $8)`,
        [s.skillId, s.tenantId, version, s.description, s.content, s.sources, JSON.stringify(s.flags), s.at],
      );
      return version;
    },

    /** A version goes live: the one promoted before it, and older drafts, are retired; the skill is promoted at it. */
    async promoteVersion(q: Queryable, r: { tenantId: string; skillId: string; version: number; by: string; at: Date }): Promise<void> {
      await q.query(
        `update skill_versions set status = 'retired' where skill_id = $1 and tenant_id = $2 and (status = 'promoted' or (status = 'proposed' and version < $3))`,
        [r.skillId, r.tenantId, r.version],
      );
      await q.query(`update skill_versions set status = 'promoted', reviewed_by = $4, reviewed_at = $5 where skill_id = $1 and tenant_id = $2 and version = $3`, [
        r.skillId,
        r.tenantId,
        r.version,
        r.by,
        r.at,
      ]);
      await q.query(`update skills set status = 'promoted', promoted_version = $3, promoted_at = $4, updated_at = $4 where id = $1 and tenant_id = $2`, [
        r.skillId,
        r.tenantId,
        r.version,
        r.at,
      ]);
    },

    /** A reviewer rejects a waiting version; what is promoted stays. */
    async rejectVersion(q: Queryable, r: { tenantId: string; skillId: string; version: number; by: string; at: Date }): Promise<void> {
      await q.query(`update skill_versions set status = 'rejected', reviewed_by = $4, reviewed_at = $5 where skill_id = $1 and tenant_id = $2 and version = $3`, [
        r.skillId,
        r.tenantId,
        r.version,
        r.by,
        r.at,
      ]);
      await q.query(`update skills set updated_at = $3 where id = $1 and tenant_id = $2`, [r.skillId, r.tenantId, r.at]);
    },

    /** The skill is deprecated: agents no longer load it; a version waiting is rejected with it, the promoted one retired. */
    async deprecate(q: Queryable, r: { tenantId: string; skillId: string; by: string; at: Date }): Promise<void> {
      await q.query(
        `update skill_versions set status = case when status = 'proposed' then 'rejected' else 'retired' end,
                reviewed_by = case when status = 'proposed' then $3 else reviewed_by end,
                reviewed_at = case when status = 'proposed' then $4 else reviewed_at end
          where skill_id = $1 and tenant_id = $2 and status in ('proposed', 'promoted')`,
        [r.skillId, r.tenantId, r.by, r.at],
      );
      await q.query(`update skills set status = 'deprecated', promoted_version = null, deprecated_at = $3, updated_at = $3 where id = $1 and tenant_id = $2`, [
        r.skillId,
        r.tenantId,
        r.at,
      ]);
    },

    async versions(q: Queryable, tenantId: string, skillId: string): Promise<SkillVersionRow[]> {
      const { rows } = await q.query<SkillVersionRow>(`select ${VERSION} from skill_versions where skill_id = $1 and tenant_id = $2 order by version`, [skillId, tenantId]);
      return rows;
    },

    async version(q: Queryable, tenantId: string, skillId: string, version: number): Promise<SkillVersionRow | null> {
      const { rows } = await q.query<SkillVersionRow>(`select ${VERSION} from skill_versions where skill_id = $1 and tenant_id = $2 and version = $3`, [
        skillId,
        tenantId,
        version,
      ]);
      return rows[0] ?? null;
    },

    /**
     * Skills agents load (the promoted version of each promoted skill), and the names of those promoted
     * once and no longer (a runtime that allowed them keeps the rule until it is overridden). Proposals
     * never promoted are neither: they do not change what runtimes are configured with.
     */
    async forRuntimes(q: Queryable, tenantId: string): Promise<{ promoted: Array<{ name: string; version: number; content: string }>; others: string[] }> {
      const { rows } = await q.query<{ name: string; status: SkillStatus; version: number | null; content: string | null }>(
        `select s.name, s.status, s.promoted_version as version, v.content
           from skills s left join skill_versions v on v.skill_id = s.id and v.version = s.promoted_version
          where s.tenant_id = $1 and (s.promoted_version is not null or s.promoted_at is not null) order by s.name`,
        [tenantId],
      );
      return {
        promoted: rows.filter((r) => r.version !== null && r.content !== null).map((r) => ({ name: r.name, version: r.version!, content: r.content! })),
        others: rows.filter((r) => r.version === null || r.content === null).map((r) => r.name),
      };
    },

    /** Records that an agent loaded a promoted skill (once per tool call). */
    async recordLoad(q: Queryable, l: { callId: string; tenantId: string; name: string; sessionId: string; at: Date }): Promise<void> {
      await q.query(
        `insert into skill_loads (call_id, tenant_id, skill_id, session_id, loaded_at)
         select $1, $2, s.id, $4, $5 from skills s where s.tenant_id = $2 and s.name = $3 and s.promoted_version is not null
         on conflict (tenant_id, call_id) do nothing`,
        [l.callId, l.tenantId, l.name, l.sessionId, l.at],
      );
    },

    async loadsSince(q: Queryable, tenantId: string, skillId: string, since: Date | null): Promise<number> {
      const { rows } = await q.query<{ n: number }>(`select count(*)::int as n from skill_loads where tenant_id = $1 and skill_id = $2 and ($3::timestamptz is null or loaded_at >= $3)`, [
        tenantId,
        skillId,
        since,
      ]);
      return rows[0].n;
    },

    /**
     * The session's latest turn sent to its runtime: its user message id, when it was queued, and whether
     * the orchestrator wrote it (a plan's planning or synthesis prompt is not a person's request).
     */
    async latestTurn(q: Queryable, tenantId: string, sessionId: string): Promise<{ messageId: string; createdAt: Date; orchestrated: boolean } | null> {
      const { rows } = await q.query<{ messageId: string; createdAt: Date; orchestrated: boolean }>(
        `select t.message_id as "messageId", t.created_at as "createdAt",
                exists (select 1 from orchestration_plans p where p.tenant_id = $1 and (p.planning_turn_id = t.id or p.synthesis_turn_id = t.id)) as orchestrated
           from agent_turns t where t.tenant_id = $1 and t.session_id = $2 and t.status in ('sent', 'done')
          order by t.created_at desc limit 1`,
        [tenantId, sessionId],
      );
      return rows[0] ?? null;
    },

    /** Whether a tool call of the session was refused since `since`: a person rejected it, or a rule denied it (audit). */
    async refusedSince(q: Queryable, tenantId: string, sessionId: string, since: Date): Promise<boolean> {
      const { rows } = await q.query<{ refused: boolean }>(
        `select exists (
           select 1 from audit_log a
            where a.tenant_id = $1 and a.session_id = $2 and a.ts >= $3
              and ((a.action = 'permission.reply' and a.details->>'response' = 'reject') or a.action = 'tool.denied')
         ) as refused`,
        [tenantId, sessionId, since],
      );
      return rows[0].refused;
    },

    /** Serialises the tenant's skill proposals and moves (no two proposals from one cluster). */
    async lockTenant(q: Queryable, tenantId: string): Promise<void> {
      await q.query(`select pg_advisory_xact_lock(hashtextextended('skills:' || $1::text, 0))`, [tenantId]);
    },
    /** Every trajectory of a person's turns, oldest first (their data export). */
    async trajectoriesOfUser(q: Queryable, tenantId: string, userId: string): Promise<TrajectoryRow[]> {
      const { rows } = await q.query<TrajectoryRow>(`select ${TRAJECTORY} from trajectories t where t.tenant_id = $1 and t.user_id = $2 order by t.created_at, t.id`, [tenantId, userId]);
      return rows;
    },
    /** The skill versions learnt from any of these trajectories (a person's skills, for their export). */
    async versionsFromTrajectories(q: Queryable, tenantId: string, ids: string[]): Promise<Array<{ skillId: string; name: string; version: number; status: string; description: string; content: string; createdAt: Date; sourceTrajectories: string[] }>> {
      if (!ids.length) return [];
      const { rows } = await q.query<{ skillId: string; name: string; version: number; status: string; description: string; content: string; createdAt: Date; sourceTrajectories: string[] }>(
        `select v.skill_id as "skillId", s.name, v.version, v.status, v.description, v.content, v.created_at as "createdAt",
                array(select x::text from unnest(v.source_trajectories) x where x = any($2::uuid[])) as "sourceTrajectories"
           from skill_versions v join skills s on s.id = v.skill_id and s.tenant_id = v.tenant_id
          where v.tenant_id = $1 and v.source_trajectories && $2::uuid[] order by s.name, v.version`,
        [tenantId, ids],
      );
      return rows;
    },
    /** Removes a person's trajectories (their erasure; the skills learnt from them stay); how many went. */
    async removeTrajectoriesOfUser(q: Queryable, tenantId: string, userId: string): Promise<number> {
      const { rowCount } = await q.query(`delete from trajectories where tenant_id = $1 and user_id = $2`, [tenantId, userId]);
      return rowCount ?? 0;
    },
    /** Replaces a reviewer (their audit form, `user:<id>`) with a pseudonym on the versions they reviewed (their erasure). */
    async pseudonymiseReviewer(q: Queryable, tenantId: string, actor: string, pseudonym: string): Promise<number> {
      const { rowCount } = await q.query(`update skill_versions set reviewed_by = $3 where tenant_id = $1 and reviewed_by = $2`, [tenantId, actor, pseudonym]);
      return rowCount ?? 0;
    },


    /** How many of the tenant's trajectories were recorded before `before` (retention's dry run). */
    async countTrajectoriesBefore(q: Queryable, tenantId: string, before: Date): Promise<number> {
      const { rows } = await q.query<{ n: number }>(`select count(*)::int as n from trajectories where tenant_id = $1 and created_at < $2`, [tenantId, before]);
      return rows[0].n;
    },
    /**
     * Removes up to `limit` of the tenant's trajectories recorded before `before`, oldest first (retention;
     * the skills learnt from them stay). One a proposal job holds right now waits for the next run. How many went.
     */
    async removeTrajectoriesBefore(q: Queryable, tenantId: string, before: Date, limit: number): Promise<number> {
      const { rowCount } = await q.query(
        `delete from trajectories where id in (select id from trajectories where tenant_id = $1 and created_at < $2
            and (proposal_job is null or skill_id is not null) order by created_at limit $3)`,
        [tenantId, before, limit],
      );
      return rowCount ?? 0;
    },
  };
}

export type SkillsRepo = ReturnType<typeof createSkillsRepo>;
