import type { Database } from '../db/database.js';
import { CODE_HOST_REPLY_JOB, CODE_HOST_RUN_JOB, CODE_HOST_SWEEP_CRON, CODE_HOST_SWEEP_JOB } from './codehost/codehost-contract.js';
import type { createCodeHostIntake } from './codehost/codehost-intake.service.js';
import { CODE_HOST_TURN_END_JOB, type createCodeHostRuns } from './codehost/codehost-runs.service.js';
import { GATEWAY_REPLY_JOB, GATEWAY_SEND_JOB, type PairingService } from './gateways/pairing.service.js';
import type { JobHandlers } from './jobs/job-queue.js';
import { EMBED_MEMORIES_JOB, EMBED_MEMORIES_LOST_JOB, EMBED_MEMORY_JOB, type createMemoryIndexer } from './memories/memory-indexer.js';
import { ORCHESTRATE_PLAN_JOB, ORCHESTRATE_STEP_JOB, ORCHESTRATE_SWEEP_CRON, ORCHESTRATE_SWEEP_JOB, type OrchestratorService } from './orchestrator/orchestrator.service.js';
import { RETENTION_CRON, RETENTION_JOB, type createRetentionService } from './retention/retention.service.js';
import { ANALYTICS_JOB, type createSessionAnalytics } from './sessions/session-analytics.js';
import { INDEX_SESSIONS_JOB, type createSessionManage } from './sessions/session-manage.js';
import { AGENT_TURN_LOST_JOB } from './sessions/session-turns.js';
import { AGENT_TURN_JOB, type createTurnRunner } from './sessions/turn-runner.js';
import { PROPOSE_SKILL_JOB, RECORD_TRAJECTORY_JOB, type createSkillsService } from './skills/skills.service.js';
import { PROVISION_WORKSPACE_JOB, type TenantsService } from './tenants/tenants.service.js';

type Made<F extends (...args: any) => any> = ReturnType<F>;

/**
 * The queues the worker serves, each a thin adapter over one service method, the jobs queued on a
 * schedule (cron) by the job queue's supervising process, and what a worker does as it starts.
 */
export function createJobHandlers(s: {
  db: Pick<Database, 'mode'>;
  tenants: Pick<TenantsService, 'provisionWorkspace'>;
  turns: Pick<Made<typeof createTurnRunner>, 'runTurn' | 'jobLost' | 'recoverOrphans' | 'unstick'>;
  sessionAnalytics: Pick<Made<typeof createSessionAnalytics>, 'recordAnalytics'>;
  pairing: Pick<PairingService, 'sendJob' | 'replyJob'>;
  memoryIndexer: Pick<Made<typeof createMemoryIndexer>, 'embedMemory' | 'backfill' | 'backfillLost'>;
  sessionManage: Pick<Made<typeof createSessionManage>, 'backfill'>;
  orchestrator: Pick<OrchestratorService, 'planJob' | 'stepJob' | 'sweepJob'>;
  skills: Pick<Made<typeof createSkillsService>, 'recordJob' | 'proposeJob'>;
  codeHostIntake: Pick<Made<typeof createCodeHostIntake>, 'sweepJob'>;
  retention: Pick<Made<typeof createRetentionService>, 'runAll'>;
  codeHostRuns: Pick<Made<typeof createCodeHostRuns>, 'runJob' | 'replyJob' | 'turnEndJob'>;
}) {
  const { tenants, turns, sessionAnalytics, pairing, memoryIndexer, sessionManage, orchestrator, skills, codeHostIntake, retention, codeHostRuns } = s;
  const jobHandlers: JobHandlers = {
    [PROVISION_WORKSPACE_JOB]: async (ctx, data: { tenantId: string }) => {
      await tenants.provisionWorkspace(ctx, data);
    },
    [AGENT_TURN_JOB]: (ctx, data: { turnId: string }) => turns.runTurn(ctx, data),
    [AGENT_TURN_LOST_JOB]: (ctx, data: { turnId: string }) => turns.jobLost(ctx, data),
    [ANALYTICS_JOB]: (ctx, data) => sessionAnalytics.recordAnalytics(ctx, data),
    [GATEWAY_SEND_JOB]: (ctx, data) => pairing.sendJob(ctx, data),
    [GATEWAY_REPLY_JOB]: (ctx, data) => pairing.replyJob(ctx, data),
    [EMBED_MEMORY_JOB]: (ctx, data) => memoryIndexer.embedMemory(ctx, data),
    [EMBED_MEMORIES_JOB]: (ctx, data, job) => memoryIndexer.backfill(ctx, data, { retryCount: job.retryCount }),
    [EMBED_MEMORIES_LOST_JOB]: (ctx, data) => memoryIndexer.backfillLost(ctx, data),
    [INDEX_SESSIONS_JOB]: (ctx, data) => sessionManage.backfill(ctx, data),
    [ORCHESTRATE_PLAN_JOB]: (ctx, data, job) => orchestrator.planJob(ctx, data, job),
    [ORCHESTRATE_STEP_JOB]: (ctx, data) => orchestrator.stepJob(ctx, data),
    [ORCHESTRATE_SWEEP_JOB]: (ctx) => orchestrator.sweepJob(ctx),
    [RECORD_TRAJECTORY_JOB]: (ctx, data) => skills.recordJob(ctx, data),
    [PROPOSE_SKILL_JOB]: (ctx, data) => skills.proposeJob(ctx, data),
    [CODE_HOST_SWEEP_JOB]: (ctx) => codeHostIntake.sweepJob(ctx),
    // Retention: the tenants' periods, enforced daily.
    [RETENTION_JOB]: (ctx) => retention.runAll(ctx),
    // Code hosts: a trigger's run, a reply on the host, a run's turn ended.
    [CODE_HOST_RUN_JOB]: (ctx, data, job) => codeHostRuns.runJob(ctx, data, job),
    [CODE_HOST_REPLY_JOB]: (ctx, data) => codeHostRuns.replyJob(ctx, data),
    [CODE_HOST_TURN_END_JOB]: (ctx, data, job) => codeHostRuns.turnEndJob(ctx, data, job),
  };

  /** Jobs queued on a schedule (cron) by the job queue's supervising process. */
  const schedules: Record<string, string> = { [ORCHESTRATE_SWEEP_JOB]: ORCHESTRATE_SWEEP_CRON, [RETENTION_JOB]: RETENTION_CRON, [CODE_HOST_SWEEP_JOB]: CODE_HOST_SWEEP_CRON };

  return {
    jobHandlers,
    schedules,
    /**
     * What a job worker does as it starts and now and then (src/jobs/worker.ts): turn jobs whose worker
     * died are queued again at once, parked turns nobody handed on are queued. `starting`: this worker's
     * first round (on the embedded database it is the only worker, so every job still active was a dead
     * process's).
     */
    async recoverJobs(o: { starting?: boolean } = {}): Promise<{ recovered: number; unstuck: number }> {
      const recovered = await turns.recoverOrphans({ starting: o.starting && s.db.mode === 'embedded' });
      const unstuck = await turns.unstick();
      return { recovered, unstuck };
    },
  };
}
