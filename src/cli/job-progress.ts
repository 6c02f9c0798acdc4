import type { PublicJob } from '../core/jobs/jobs.service.js';

/**
 * Shows a running job's progress on stderr (stdout stays for the result): a bar redrawn in place on a
 * terminal, otherwise one plain line whenever the count moves (logs and CI stay readable). Silent when
 * `quiet` (--json).
 */
export function createJobProgress(options: { quiet: boolean; stream?: NodeJS.WriteStream; label: string }) {
  const stream = options.stream ?? process.stderr;
  const live = Boolean(stream.isTTY && stream.columns) && !process.env.CI;
  let last = '';
  let drawn = false;

  const counts = (job: PublicJob) => {
    const r = (job.result ?? {}) as { embedded?: number; total?: number };
    // '?' until the job has counted what it will do (its first progress report).
    return { done: Number(r.embedded ?? 0), total: r.total === undefined ? '?' : Number(r.total) };
  };

  return {
    update(job: PublicJob) {
      if (options.quiet) return;
      const { done, total } = counts(job);
      const retry = job.status === 'running' && job.error ? ` (${job.error})` : '';
      if (live) {
        const width = Math.max(10, Math.min(40, (stream.columns ?? 80) - 50));
        const filled = typeof total === 'number' && total > 0 ? Math.round((Math.min(done, total) / total) * width) : job.status === 'completed' ? width : 0;
        const bar = `[${'#'.repeat(filled)}${'-'.repeat(width - filled)}]`;
        const text = `${options.label} ${bar} ${done}/${total} ${job.status}${retry}`;
        stream.write(`\r\x1b[K${text.slice(0, (stream.columns ?? 80) - 1)}`);
        drawn = true;
        return;
      }
      const line = `${options.label}: ${job.status}, ${done}/${total} embedded${retry}`;
      if (line !== last) stream.write(line + '\n');
      last = line;
    },
    /** Ends the live line (so what follows starts on its own line). */
    done() {
      if (drawn) stream.write('\n');
      drawn = false;
    },
    note(text: string) {
      if (options.quiet) return;
      if (drawn) stream.write('\n');
      drawn = false;
      stream.write(text + '\n');
    },
  };
}
