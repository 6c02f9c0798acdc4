import { setTimeout as sleep } from 'node:timers/promises';
import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { createJobProgress } from '../../src/cli/job-progress.js';
import { info } from '../../src/cli/output.js';
import { EMBED_MEMORIES_JOB } from '../../src/core/memories/memory-indexer.js';

/** How often the job's row is read while following it. */
const POLL_MS = 500;
/** A job still queued after this long probably has no worker: say so (once), keep waiting. */
const NO_WORKER_HINT_MS = 15_000;

export default class MemoryBackfill extends BaseCommand<typeof MemoryBackfill> {
  static override summary = 'Embed memories lacking a vector of the current embedder (queues an embed-memories job and follows it).';
  static override description =
    'Queues the job through the jobs API\'s service (the same checks and audit as POST /v1/jobs) and follows it to the end: a progress bar on stderr in a terminal, plain lines otherwise, nothing with --json (which prints the finished job). Exits 1 when the job fails. The job runs on a worker (`aws worker` on PostgreSQL, inside `aws serve` on the embedded database); interrupting this command does not stop it. A killed worker loses nothing: the retried job resumes.';
  static override examples = ['<%= config.bin %> memory backfill', '<%= config.bin %> memory backfill --limit 5000 --tenant acme', '<%= config.bin %> memory backfill --detach --json'];
  static override flags = {
    tenant: BaseCommand.tenantFlag,
    limit: Flags.integer({ summary: 'Embed at most this many memories.', default: 500, min: 1 }),
    detach: Flags.boolean({ summary: 'Queue the job and return at once (follow it with GET /v1/jobs/<id>).' }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const ctx = await this.tenantCtx(this.flags.tenant);
    let job = await core.jobs.create(ctx, { kind: EMBED_MEMORIES_JOB, payload: { limit: this.flags.limit } });
    if (this.flags.detach) {
      this.output({ job }, () => info(`queued job ${job.id} (embed up to ${this.flags.limit} memories)`));
      return;
    }
    const progress = createJobProgress({ quiet: this.jsonMode, label: 'embedding memories' });
    progress.update(job);
    const started = Date.now();
    let hinted = false;
    while (job.status === 'queued' || job.status === 'running') {
      await sleep(POLL_MS);
      job = await core.jobs.get(ctx, job.id);
      progress.update(job);
      if (job.status === 'queued' && !hinted && Date.now() - started > NO_WORKER_HINT_MS) {
        hinted = true;
        progress.note(`job ${job.id} is still queued: is a worker running? (\`npx aws worker\` on PostgreSQL; \`npx aws serve\` runs one on the embedded database)`);
      }
    }
    progress.done();
    const r = (job.result ?? {}) as { embedded?: number; remaining?: number; superseded?: boolean };
    this.output({ job }, () => {
      if (job.status === 'completed') {
        info(`done: ${r.embedded ?? 0} memories embedded, ${r.remaining ?? 0} still lacking a vector of the model${r.superseded ? ' (the embedder changed meanwhile: its own backfill takes over)' : ''}`);
      } else {
        info(`the backfill failed: ${job.error ?? 'unknown error'} (${r.embedded ?? 0} memories were embedded and stay embedded; run it again to resume)`);
      }
    });
    if (job.status === 'failed') this.exit(1);
  }
}
