import type { Job, PgBoss } from 'pg-boss';
import { systemCtx } from '../kernel/context.js';
import type { Core } from '../core/create-core.js';
import { JOBS_ENQUEUED } from '../core/jobs/job-queue.js';
import type { Logger } from '../kernel/logger.js';

/**
 * How often an idle worker polls anyway. Enqueued jobs wake workers through the event bus, so this only
 * bounds the delay for retries and for events lost while the bus reconnects. Polling more often costs an
 * embedded `aws serve` measurable CPU (each poll is a query in the in-process database).
 */
const BACKSTOP_POLL_S = 10;
/**
 * How often a worker looks for turn jobs whose worker died on this host (and parked turns nobody handed
 * on): besides at its start, so a worker that dies beside others costs its turns seconds, not the job
 * queue's expiry.
 */
const RECOVER_EVERY_MS = 10_000;

interface Poller {
  id: string;
  /** Running a job (an idle poller is sleeping until its next poll, or fetching). */
  busy: boolean;
}

export interface Worker {
  queues: string[];
  /**
   * Stops fetching (a stopping serve: no new turn starts on its runtimes) and waits up to timeoutMs for
   * the jobs in flight; the job queue stays open for sending (a turn handed over queues its session's next).
   */
  pause(timeoutMs: number): Promise<void>;
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
  // Turns a worker that died left half-sent go again now, not after their jobs expire (minutes).
  const recover = (starting: boolean) =>
    core.recoverJobs({ starting }).then(
      (r) => {
        if (r.recovered || r.unstuck) log.warn(r, 'turns left by a worker that died, or parked with nobody to hand them on, were queued again');
      },
      (err) => log.error({ err: (err as Error).message }, 'could not look for turns left by a worker that died'),
    );
  await recover(true);
  const recovering = setInterval(() => void recover(false), RECOVER_EVERY_MS);
  recovering.unref();
  const pollers = new Map<string, Poller[]>();
  const next = new Map<string, number>();
  for (const name of queues) {
    const handler = core.jobHandlers[name];
    // N pollers on a queue give N jobs at once. Not pg-boss's localConcurrency: work() then returns the id
    // of its first poller only, and the enqueue wake-up below must be able to reach any idle one.
    for (let i = 0; i < options.concurrency; i++) {
      const poller: Poller = { id: '', busy: false };
      poller.id = await boss.work(name, { batchSize: 1, pollingIntervalSeconds: BACKSTOP_POLL_S }, async ([job]: Job<object>[]) => {
        poller.busy = true;
        // pg-boss waits a full polling interval after every job; while jobs keep coming, fetch the next at once.
        setImmediate(() => boss.notifyWorker(poller.id));
        const jobLog = log.child({ jobId: job.id, queue: name });
        const started = Date.now();
        try {
          const result = await handler(systemCtx(jobLog, { name: 'worker', requestId: job.id, channel: 'worker' }), job.data, { id: job.id, name, retryCount: job.retryCount });
          jobLog.info({ durationMs: Date.now() - started, ...(result && typeof result === 'object' ? { result } : {}) }, 'job completed');
        } catch (err) {
          jobLog.error({ err: (err as Error).message, durationMs: Date.now() - started }, 'job failed');
          throw err;
        } finally {
          poller.busy = false;
        }
      });
      pollers.set(name, [...(pollers.get(name) ?? []), poller]);
    }
  }
  // Fetch at once when a job is enqueued (in this process or, on PostgreSQL, any other). One job wakes ONE
  // idle poller, taking turns: waking them all made every poller query at once for the one job, and on
  // the embedded database (one session, queries queue) that doubled the enqueue -> start latency. A busy
  // poller fetches again by itself when its job ends, so with none idle there is nobody to wake.
  const unsubscribe = await core.bus.subscribe(JOBS_ENQUEUED, (payload) => {
    const name = (payload as { name?: string } | null)?.name ?? '';
    const list = pollers.get(name);
    if (!list?.length) return;
    const start = next.get(name) ?? 0;
    for (let k = 0; k < list.length; k++) {
      const p = list[(start + k) % list.length];
      if (p.busy) continue;
      next.set(name, (start + k + 1) % list.length);
      boss.notifyWorker(p.id);
      return;
    }
  });
  // Scheduled jobs (cron): recorded in the queue's database, queued by whichever process supervises it.
  for (const [name, cron] of Object.entries(core.schedules)) await boss.schedule(name, cron, {}, { tz: 'UTC' });
  log.info({ queues, concurrency: options.concurrency }, 'worker started');
  let paused: Promise<void> | null = null;
  return {
    queues,
    pause(timeoutMs) {
      paused ??= (async () => {
        clearInterval(recovering);
        await unsubscribe();
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          Promise.allSettled(queues.map((name) => boss.offWork(name, { wait: true }))),
          new Promise<void>((r) => {
            timer = setTimeout(r, timeoutMs);
            timer.unref();
          }),
        ]);
        clearTimeout(timer);
        log.info('worker paused: no new jobs are taken');
      })();
      return paused;
    },
    async stop(timeoutMs) {
      clearInterval(recovering);
      if (!paused) await unsubscribe();
      await boss.stop({ graceful: true, timeout: timeoutMs, close: true });
      log.info('worker stopped');
    },
  };
}
