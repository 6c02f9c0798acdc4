import type { FileChange } from '../runtime/host/workspace-snapshots.js';

/**
 * The limits of a change set the API answers (session-changes.ts): the diffs come from the service's own
 * snapshots (host/workspace-snapshots.ts, each file's cut at 256 KiB there). Pure.
 */

export type { FileChange } from '../runtime/host/workspace-snapshots.js';

/** The most of all diffs in one answer; files past it are listed with their counts and no diff. */
const MAX_TOTAL_DIFF_CHARS = 4 * 1024 * 1024;

/** Keeps an answer's diffs within MAX_TOTAL_DIFF_CHARS: files past it keep their counts, not their diff. */
export function capDiffs(files: FileChange[], max = MAX_TOTAL_DIFF_CHARS): FileChange[] {
  let left = max;
  return files.map((f) => {
    if (f.diff.length <= left) {
      left -= f.diff.length;
      return f;
    }
    left = 0;
    return { ...f, diff: '', truncated: true };
  });
}

/** Totals of a change set. */
export function totalsOf(files: FileChange[]): { files: number; additions: number; deletions: number } {
  return { files: files.length, additions: files.reduce((n, f) => n + f.additions, 0), deletions: files.reduce((n, f) => n + f.deletions, 0) };
}
