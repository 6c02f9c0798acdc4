import type PgBoss from 'pg-boss';
import { systemCtx } from '../core/context.js';
import type { Core } from '../core/create-core.js';
import type { Logger } from '../core/logger.js';

export interface Worker {
  queues: string[];
  /** Stops fetching, waits up to timeoutMs for jobs in flight, then releases the rest for another worker. */
  stop(timeoutMs: number): Promise<void>;
}

/**
 * Serves every queue the core registers. Used by `aws worker`, and by `aws serve` in embedded mode.
 * pg-boss retries a failed job (retryLimit 3, back-off) and expires a job whose worker died mid-way,
 * so a crash never loses a job; handlers are written to be safe to run again.
 */
export async function startWorker(core: Core, boss: PgBoss, log: Logger, options: { concurrency: number }): Promise<Worker> {
  const queues = Object.keys(core.jobHandlers);
  for (const name of queues) {
    const handler = core.jobHandlers[name];
    // pg-boss 10 has no per-worker concurrency option: N pollers on a queue give N jobs at once.
    for (let i = 0; i < options.concurrency; i++) {
      await boss.work(name, { batchSize: 1, pollingIntervalSeconds: 1 }, async ([job]) => {
        const jobLog = log.child({ jobId: job.id, queue: name });
        const started = Date.now();
        try {
          await handler(systemCtx(jobLog, { name: 'worker', requestId: job.id, channel: 'worker' }), job.data, { id: job.id, name });
          jobLog.info({ durationMs: Date.now() - started }, 'job completed');
        } catch (err) {
          jobLog.error({ err: (err as Error).message, durationMs: Date.now() - started }, 'job failed');
          throw err;
        }
      });
    }
  }
  log.info({ queues, concurrency: options.concurrency }, 'worker started');
  return {
    queues,
    async stop(timeoutMs) {
      await boss.stop({ graceful: true, wait: true, timeout: timeoutMs, close: true });
      log.info('worker stopped');
    },
  };
}
