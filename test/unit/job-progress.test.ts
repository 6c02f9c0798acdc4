import { describe, expect, it, onTestFinished } from 'vitest';
import { createJobProgress } from '../../src/cli/job-progress.js';
import type { PublicJob } from '../../src/core/jobs/jobs.service.js';

const job = (status: PublicJob['status'], result: Record<string, unknown> | null, error: string | null = null) =>
  ({ id: 'j', kind: 'embed-memories', status, payload: { limit: 500 }, result, error, createdBy: 'system:cli', createdAt: new Date(), startedAt: null, finishedAt: null }) as PublicJob;

function stream(tty: boolean) {
  const out: string[] = [];
  return { out, s: { isTTY: tty, columns: tty ? 100 : undefined, write: (x: string) => (out.push(x), true) } as unknown as NodeJS.WriteStream };
}

describe('job progress on stderr', () => {
  it('redraws one bar in place on a terminal, and ends its line', () => {
    // A terminal outside CI (under CI=true, as in .ci/run, the bar is off on purpose: plain lines).
    const ci = process.env.CI;
    delete process.env.CI;
    onTestFinished(() => {
      if (ci !== undefined) process.env.CI = ci;
    });
    const { out, s } = stream(true);
    const p = createJobProgress({ quiet: false, stream: s, label: 'embedding memories' });
    p.update(job('queued', null));
    p.update(job('running', { total: 200, embedded: 50 }));
    p.update(job('running', { total: 200, embedded: 50 }, 'attempt 1 failed, retrying: boom'));
    p.update(job('completed', { total: 200, embedded: 200 }));
    p.done();
    expect(out.slice(0, 4).every((l) => l.startsWith('\r\x1b[K'))).toBe(true);
    expect(out[1]).toMatch(/\[#{10}-{30}\] 50\/200 running$/);
    // Cut to the terminal's width: a live line that wraps could not be redrawn in place.
    expect(out[2]).toMatch(/50\/200 running \(attempt 1 failed, ret$/);
    expect(out[2].length - '\r\x1b[K'.length).toBe(99);
    expect(out[3]).toMatch(/\[#{40}\] 200\/200 completed$/);
    expect(out[4]).toBe('\n');
  });

  it('writes a plain line whenever it changes without a terminal, and nothing when quiet', () => {
    const { out, s } = stream(false);
    const p = createJobProgress({ quiet: false, stream: s, label: 'embedding memories' });
    p.update(job('queued', null));
    p.update(job('queued', null));
    p.update(job('running', { total: 0, embedded: 0 }));
    p.done();
    expect(out).toEqual(['embedding memories: queued, 0/? embedded\n', 'embedding memories: running, 0/0 embedded\n']);
    const quiet = stream(false);
    const q = createJobProgress({ quiet: true, stream: quiet.s, label: 'x' });
    q.update(job('running', { total: 1, embedded: 1 }));
    q.note('hint');
    expect(quiet.out).toEqual([]);
  });
});
