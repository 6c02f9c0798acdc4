/**
 * What a turn, or a whole session, changed in the workspace, from what the runtime reports of each turn
 * (opencode 1.18.33 `Snapshot.FileDiff`: a file's path, status, line counts and a unified patch that has
 * the whole file as context, empty for a binary file). Pure: the rules that make the change sets the
 * API answers (session-changes.ts), tested on their own.
 *
 * A patch with the whole file as context holds both sides of the file, so a session's change set is built
 * from each file's side before the first turn that changed it and its side after the last one, and every
 * diff is cut to a few lines of context here rather than sent with the whole file.
 */

export type ChangeStatus = 'added' | 'modified' | 'deleted' | 'renamed';

export interface FileChange {
  path: string;
  status: ChangeStatus;
  /** A renamed file's old path. */
  from?: string;
  additions: number;
  deletions: number;
  /** Named only: its bytes are not diffed (nor sent). */
  binary: boolean;
  /** Unified diff (`--- a/…`, `+++ b/…`, hunks with 3 lines of context); '' for a binary or renamed-only file. */
  diff: string;
  /** The diff was cut at the size limit (its first part is here). */
  truncated: boolean;
}

/** What the runtime reports of one changed file in one turn. */
export interface TurnFileDiff {
  file: string;
  patch: string;
  additions: number;
  deletions: number;
  status?: 'added' | 'deleted' | 'modified';
}

/** One line of a file: its text, and whether a newline ends it (a file's last line may have none). */
interface Line {
  s: string;
  nl: boolean;
}
type Op = { t: ' ' | '-' | '+'; line: Line };

/** Lines of context around each change in the diffs served. */
export const CONTEXT_LINES = 3;
/** The most of one file's diff served (bytes of UTF-16, near enough); beyond it the diff is cut. */
export const MAX_FILE_DIFF_CHARS = 256 * 1024;
/** The most of all diffs in one answer; files past it are listed with their counts and no diff. */
export const MAX_TOTAL_DIFF_CHARS = 4 * 1024 * 1024;
/** Edit distance past which a diff is not searched for a shortest form: the changed middle is shown whole. */
const MAX_EDIT_DISTANCE = 1500;

/**
 * The edit script of a patch (' ', '-', '+' lines, in order) and so both sides of the file. Header lines
 * (`Index:`, `===`, `---`, `+++`) and hunk heads are skipped; `\ No newline at end of file` marks the line
 * before it.
 */
export function parsePatch(patch: string): Op[] {
  const ops: Op[] = [];
  let inHunk = false;
  const lines = patch.split('\n');
  if (lines.at(-1) === '') lines.pop();
  for (const raw of lines) {
    if (raw.startsWith('@@')) {
      inHunk = true;
      continue;
    }
    if (!inHunk) continue;
    const t = raw[0];
    if (t === '\\') {
      const last = ops.at(-1);
      if (last) last.line = { ...last.line, nl: false };
      continue;
    }
    if (t === ' ' || t === '-' || t === '+') ops.push({ t, line: { s: raw.slice(1), nl: true } });
  }
  // `\ No newline` marks a line of one side: a context line without one is without one on both sides.
  return ops;
}

const sideOf = (ops: Op[], side: 'before' | 'after'): Line[] => ops.filter((o) => o.t === ' ' || o.t === (side === 'before' ? '-' : '+')).map((o) => o.line);
const same = (a: Line, b: Line) => a.s === b.s && a.nl === b.nl;

/**
 * A shortest edit script from `a` to `b` (Myers' O(ND) algorithm) after their common head and tail are
 * taken off; past MAX_EDIT_DISTANCE the changed middle is one deletion and one addition (still a correct
 * diff, only not the shortest).
 */
export function diffLines(a: Line[], b: Line[]): Op[] {
  let head = 0;
  while (head < a.length && head < b.length && same(a[head], b[head])) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && same(a[a.length - 1 - tail], b[b.length - 1 - tail])) tail++;
  const x = a.slice(head, a.length - tail);
  const y = b.slice(head, b.length - tail);
  const middle = myers(x, y) ?? [...x.map((line) => ({ t: '-' as const, line })), ...y.map((line) => ({ t: '+' as const, line }))];
  return [...a.slice(0, head).map((line) => ({ t: ' ' as const, line })), ...middle, ...a.slice(a.length - tail).map((line) => ({ t: ' ' as const, line }))];
}

function myers(a: Line[], b: Line[]): Op[] | null {
  const n = a.length;
  const m = b.length;
  if (n === 0) return b.map((line) => ({ t: '+' as const, line }));
  if (m === 0) return a.map((line) => ({ t: '-' as const, line }));
  const max = Math.min(n + m, MAX_EDIT_DISTANCE);
  const offset = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  for (let d = 0; d <= max; d++) {
    // Only the diagonals this step can reach are kept for the walk back.
    trace.push(v.slice(offset - d - 1, offset + d + 2));
    for (let k = -d; k <= d; k += 2) {
      let px = k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1]) ? v[offset + k + 1] : v[offset + k - 1] + 1;
      let py = px - k;
      while (px < n && py < m && same(a[px], b[py])) {
        px++;
        py++;
      }
      v[offset + k] = px;
      if (px >= n && py >= m) return backtrack(trace, a, b, d, k);
    }
  }
  return null;
}

function backtrack(trace: Int32Array[], a: Line[], b: Line[], dEnd: number, kEnd: number): Op[] {
  const ops: Op[] = [];
  let x = a.length;
  let y = b.length;
  let k = kEnd;
  for (let d = dEnd; d > 0; d--) {
    // trace[d] holds v before step d, for diagonals -d-1 .. d+1.
    const at = (kk: number) => trace[d][kk + d + 1];
    const down = k === -d || (k !== d && at(k - 1) < at(k + 1));
    const prevK = down ? k + 1 : k - 1;
    const prevX = at(prevK);
    const prevY = prevX - prevK;
    while (x > (down ? prevX : prevX + 1) && y > (down ? prevY + 1 : prevY)) ops.push({ t: ' ', line: a[--x] }), y--;
    if (down) ops.push({ t: '+', line: b[--y] });
    else ops.push({ t: '-', line: a[--x] });
    k = prevK;
  }
  while (x > 0 && y > 0) ops.push({ t: ' ', line: a[--x] }), y--;
  return ops.reverse();
}

/**
 * A unified diff of an edit script: hunks with `context` lines around each change, under `--- a/from`
 * and `+++ b/path` (`/dev/null` for a side that does not exist). Cut at `maxChars`.
 */
export function unifiedDiff(ops: Op[], o: { path: string; from?: string; status: ChangeStatus; context?: number; maxChars?: number }): { diff: string; truncated: boolean } {
  const context = o.context ?? CONTEXT_LINES;
  const maxChars = o.maxChars ?? MAX_FILE_DIFF_CHARS;
  const changed = ops.map((op, i) => (op.t !== ' ' ? i : -1)).filter((i) => i >= 0);
  const head = `--- ${o.status === 'added' ? '/dev/null' : `a/${o.from ?? o.path}`}\n+++ ${o.status === 'deleted' ? '/dev/null' : `b/${o.path}`}\n`;
  if (!changed.length) return { diff: '', truncated: false };
  // Line numbers (1-based) of each op on both sides.
  const oldNo: number[] = [];
  const newNo: number[] = [];
  let on = 1;
  let nn = 1;
  for (const op of ops) {
    oldNo.push(on);
    newNo.push(nn);
    if (op.t !== '+') on++;
    if (op.t !== '-') nn++;
  }
  let out = head;
  let i = 0;
  while (i < changed.length) {
    const start = Math.max(0, changed[i] - context);
    let end = Math.min(ops.length, changed[i] + context + 1);
    let j = i + 1;
    while (j < changed.length && changed[j] - context <= end) {
      end = Math.min(ops.length, changed[j] + context + 1);
      j++;
    }
    const slice = ops.slice(start, end);
    const oldCount = slice.filter((op) => op.t !== '+').length;
    const newCount = slice.filter((op) => op.t !== '-').length;
    // An empty side's range starts before its first line (as diff writes it).
    const oldStart = oldCount ? oldNo[start] : oldNo[start] - 1;
    const newStart = newCount ? newNo[start] : newNo[start] - 1;
    out += `@@ -${oldStart},${oldCount} +${newStart},${newCount} @@\n`;
    for (const op of slice) {
      out += `${op.t}${op.line.s}\n${op.line.nl ? '' : '\\ No newline at end of file\n'}`;
      if (out.length > maxChars) return { diff: out.slice(0, maxChars), truncated: true };
    }
    i = j;
  }
  return { diff: out, truncated: false };
}

const isBinary = (d: TurnFileDiff) => d.patch === '';
const statusOf = (d: TurnFileDiff): 'added' | 'deleted' | 'modified' => d.status ?? 'modified';

/**
 * Deleted and added files with the same text, paired as renames (the runtime reports no renames): an
 * exact copy only, and never an empty file (any two would pair).
 */
function withRenames(files: Array<FileChange & { text?: string }>): FileChange[] {
  const added = new Map<string, number>();
  files.forEach((f, i) => {
    if (f.status === 'added' && !f.binary && f.text) added.set(f.text, i);
  });
  const gone = new Set<number>();
  const out: FileChange[] = [];
  files.forEach((f, i) => {
    if (f.status !== 'deleted' || f.binary || !f.text) return;
    const to = added.get(f.text);
    if (to === undefined || gone.has(to)) return;
    added.delete(f.text);
    gone.add(to).add(i);
    out.push({ path: files[to].path, from: f.path, status: 'renamed', additions: 0, deletions: 0, binary: false, diff: '', truncated: false });
  });
  files.forEach((f, i) => {
    if (gone.has(i)) return;
    const { text: _text, ...change } = f;
    out.push(change);
  });
  return out.sort((a, b) => a.path.localeCompare(b.path));
}

const joinText = (lines: Line[]) => lines.map((l) => l.s + (l.nl ? '\n' : '')).join('');

/** What one turn changed: its files, diffs cut to a few lines of context, renames paired. */
export function turnChanges(diffs: TurnFileDiff[]): FileChange[] {
  return withRenames(
    diffs.map((d) => {
      const status = statusOf(d);
      if (isBinary(d)) return { path: d.file, status, additions: 0, deletions: 0, binary: true, diff: '', truncated: false };
      const ops = parsePatch(d.patch);
      const side = status === 'deleted' ? sideOf(ops, 'before') : sideOf(ops, 'after');
      return { path: d.file, status, additions: d.additions, deletions: d.deletions, binary: false, ...unifiedDiff(ops, { path: d.file, status }), text: status === 'modified' ? undefined : joinText(side) };
    }),
  );
}

/**
 * What a session's turns changed together, in order: each file from before the first turn that changed it
 * to after the last. A file added and then deleted again is not listed, nor one whose text came back to
 * what it was.
 */
export function sessionChanges(turns: TurnFileDiff[][]): FileChange[] {
  const files = new Map<string, { existed: boolean; exists: boolean; binary: boolean; before: Line[] | null; after: Line[] | null }>();
  for (const turn of turns) {
    for (const d of turn) {
      const status = statusOf(d);
      const ops = isBinary(d) ? null : parsePatch(d.patch);
      let f = files.get(d.file);
      if (!f) {
        f = { existed: status !== 'added', exists: true, binary: false, before: ops && status !== 'added' ? sideOf(ops, 'before') : [], after: null };
        files.set(d.file, f);
      }
      f.exists = status !== 'deleted';
      f.binary ||= ops === null;
      f.after = ops && status !== 'deleted' ? sideOf(ops, 'after') : [];
    }
  }
  const out: Array<FileChange & { text?: string }> = [];
  for (const [path, f] of files) {
    if (!f.existed && !f.exists) continue;
    const status: ChangeStatus = !f.existed ? 'added' : !f.exists ? 'deleted' : 'modified';
    if (f.binary) {
      out.push({ path, status, additions: 0, deletions: 0, binary: true, diff: '', truncated: false });
      continue;
    }
    const ops = diffLines(f.before ?? [], f.after ?? []);
    const additions = ops.filter((o) => o.t === '+').length;
    const deletions = ops.filter((o) => o.t === '-').length;
    if (status === 'modified' && !additions && !deletions) continue;
    out.push({ path, status, additions, deletions, binary: false, ...unifiedDiff(ops, { path, status }), text: status === 'added' ? joinText(f.after ?? []) : status === 'deleted' ? joinText(f.before ?? []) : undefined });
  }
  return withRenames(out);
}

/**
 * The files a run of turns deleted in the end (a renamed file's old path with them): what a redo deletes
 * again. Only plain relative paths: none that climbs out (`..`) or starts at the root.
 */
export function deletedBy(turns: TurnFileDiff[][]): string[] {
  return sessionChanges(turns)
    .flatMap((f) => (f.status === 'deleted' ? [f.path] : f.status === 'renamed' && f.from ? [f.from] : []))
    .filter((p) => p && !p.startsWith('/') && !p.split('/').includes('..'));
}

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
