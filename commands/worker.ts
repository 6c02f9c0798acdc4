import { Flags } from '@oclif/core';
import { BaseCommand } from '../src/cli/base-command.js';
import { openCore } from '../src/cli/open-core.js';
import { untilSignal } from '../src/cli/signals.js';
import { ValidationError } from '../src/kernel/errors.js';
import { startWorker } from '../src/jobs/worker.js';
import { createLogger } from '../src/lib/logger.js';

export default class WorkerCommand extends BaseCommand<typeof WorkerCommand> {
  static override summary = 'Run a background job worker (PostgreSQL mode; run as many as you like).';
  static override description =
    'Works every queue the service registers (agent turns, analytics, embeddings, workspace provisioning). Any number of workers may run against one PostgreSQL database. On SIGTERM it stops fetching, lets jobs in flight finish (up to AGENTWS_SHUTDOWN_TIMEOUT_MS) and hands unfinished ones back to the queue. On the embedded database the worker runs inside `aws serve` instead.';
  static override examples = ['<%= config.bin %> worker', '<%= config.bin %> worker --concurrency 8'];
  static override flags = {
    concurrency: Flags.integer({ summary: 'Jobs run at once per queue (overrides AGENTWS_WORKER_CONCURRENCY).', min: 1, max: 64 }),
  };
  protected static override needsCore = false;

  async run(): Promise<void> {
    const config = this.appConfig;
    if (config.database.mode === 'embedded') {
      throw new ValidationError('`aws worker` needs PostgreSQL: on the embedded database the worker runs inside `aws serve`', {
        hint: 'Set DATABASE_URL to run separate workers, or just run `npx aws serve`.',
      });
    }
    const log = createLogger(config.logLevel, 1);
    const opened = await openCore(config, log, { supervise: true });
    const signal = untilSignal(() => process.exit(1));
    let worker;
    try {
      worker = await startWorker(opened.core, opened.boss, log, { concurrency: this.flags.concurrency ?? config.worker.concurrency });
    } catch (err) {
      await opened.close();
      throw err;
    }
    const received = await signal;
    log.info({ signal: received }, 'worker shutting down');
    const timeout = config.server.shutdownTimeoutMs;
    setTimeout(() => process.exit(1), timeout + 2000).unref();
    await worker.stop(timeout);
    await opened.close();
  }
}
