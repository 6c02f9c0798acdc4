import { describe, expect, it } from 'vitest';
import { capDiffs, deletedBy, diffLines, parsePatch, sessionChanges, turnChanges, unifiedDiff, type TurnFileDiff } from '../../src/core/sessions/change-sets.js';

/** A patch as opencode 1.18.33 writes one: the whole file as context. */
function patchOf(file: string, before: string, after: string): string {
  const a = before === '' ? [] : before.replace(/\n$/, '').split('\n');
  const b = after === '' ? [] : after.replace(/\n$/, '').split('\n');
  const lines = diffLines(a.map((s) => ({ s, nl: true })), b.map((s) => ({ s, nl: true })));
  let body = '';
  for (const op of lines) body += `${op.t}${op.line.s}\n`;
  return `Index: ${file}\n===================================================================\n--- ${file}\t\n+++ ${file}\t\n@@ -${a.length ? 1 : 0},${a.length} +${b.length ? 1 : 0},${b.length} @@\n${body}`;
}
const fd = (file: string, before: string, after: string, status: TurnFileDiff['status']): TurnFileDiff => {
  const p = patchOf(file, before, after);
  return { file, patch: p, additions: p.split('\n').filter((l) => l.startsWith('+') && !l.startsWith('+++')).length, deletions: p.split('\n').filter((l) => l.startsWith('-') && !l.startsWith('---')).length, status };
};
const lines = (n: number, change?: number) => Array.from({ length: n }, (_, i) => (i === change ? `changed ${i}` : `line ${i}`)).join('\n') + '\n';

describe('change sets', () => {
  it('cuts a whole-file patch to hunks with three lines of context, numbered on both sides', () => {
    const d = turnChanges([fd('src/app.ts', lines(40), lines(40, 20), 'modified')]);
    expect(d).toEqual([expect.objectContaining({ path: 'src/app.ts', status: 'modified', additions: 1, deletions: 1, binary: false, truncated: false })]);
    expect(d[0].diff).toBe('--- a/src/app.ts\n+++ b/src/app.ts\n@@ -18,7 +18,7 @@\n line 17\n line 18\n line 19\n-line 20\n+changed 20\n line 21\n line 22\n line 23\n');
  });

  it('names a binary file without its bytes, and an added and a deleted file against /dev/null', () => {
    const d = turnChanges([{ file: 'logo.png', patch: '', additions: 0, deletions: 0, status: 'added' }, fd('new.txt', '', 'hello\n', 'added'), fd('old.txt', 'bye\n', '', 'deleted')]);
    expect(d.map((f) => [f.path, f.status, f.binary])).toEqual([['logo.png', 'added', true], ['new.txt', 'added', false], ['old.txt', 'deleted', false]]);
    expect(d[0].diff).toBe('');
    expect(d[1].diff).toBe('--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,1 @@\n+hello\n');
    expect(d[2].diff).toBe('--- a/old.txt\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-bye\n');
  });

  it('pairs a deleted and an added file with the same text as a rename', () => {
    const d = turnChanges([fd('a/notes.md', '# Notes\nbody\n', '', 'deleted'), fd('b/notes.md', '', '# Notes\nbody\n', 'added'), fd('c.txt', '', 'other\n', 'added')]);
    expect(d.map((f) => ({ path: f.path, status: f.status, from: f.from }))).toEqual([{ path: 'b/notes.md', status: 'renamed', from: 'a/notes.md' }, { path: 'c.txt', status: 'added', from: undefined }]);
  });

  it('keeps a missing newline at the end of a file', () => {
    const ops = parsePatch('--- a\t\n+++ a\t\n@@ -1,1 +1,1 @@\n-x\n\\ No newline at end of file\n+x\n');
    expect(unifiedDiff(ops, { path: 'a', status: 'modified' }).diff).toBe('--- a/a\n+++ b/a\n@@ -1,1 +1,1 @@\n-x\n\\ No newline at end of file\n+x\n');
  });

  it('builds a session from each file before its first turn to after its last', () => {
    const t1 = [fd('a.txt', '', 'one\ntwo\nthree\n', 'added'), fd('b.txt', 'bee\n', 'bee\nhive\n', 'modified'), fd('tmp.txt', '', 'scratch\n', 'added'), fd('same.txt', 'x\n', 'y\n', 'modified')];
    const t2 = [fd('a.txt', 'one\ntwo\nthree\n', 'one\nTWO\nthree\n', 'modified'), fd('tmp.txt', 'scratch\n', '', 'deleted'), fd('same.txt', 'y\n', 'x\n', 'modified'), { file: 'img.bin', patch: '', additions: 0, deletions: 0, status: 'added' as const }];
    const s = sessionChanges([t1, t2]);
    expect(s.map((f) => [f.path, f.status, f.additions, f.deletions])).toEqual([['a.txt', 'added', 3, 0], ['b.txt', 'modified', 1, 0], ['img.bin', 'added', 0, 0]]);
    expect(s[0].diff).toBe('--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1,3 @@\n+one\n+TWO\n+three\n');
  });

  it('finds the shortest diff of a long file, and shows a rewrite past the search limit whole', () => {
    const a = Array.from({ length: 3000 }, (_, i) => ({ s: `l${i}`, nl: true }));
    const b = a.filter((_, i) => i % 100 !== 0).map((l, i) => (i % 97 === 0 ? { s: `${l.s}!`, nl: true } : l));
    const ops = diffLines(a, b);
    expect(ops.filter((o) => o.t !== '-').map((o) => o.line.s)).toEqual(b.map((l) => l.s));
    expect(ops.filter((o) => o.t !== '+').map((o) => o.line.s)).toEqual(a.map((l) => l.s));
    expect(ops.filter((o) => o.t === '-').length).toBe(30 + 31);
    const c = Array.from({ length: 2000 }, (_, i) => ({ s: `other ${i}`, nl: true }));
    const whole = diffLines(a, c);
    expect(whole.filter((o) => o.t === '-').length).toBe(3000);
    expect(whole.filter((o) => o.t === '+').length).toBe(2000);
  });

  it('cuts a diff past the size limit and says so', () => {
    const big = turnChanges([fd('big.txt', '', lines(50_000), 'added')]);
    expect(big[0].truncated).toBe(true);
    expect(big[0].diff.length).toBe(256 * 1024);
    const capped = capDiffs([...turnChanges([fd('x.txt', '', 'x\n', 'added')]), ...turnChanges([fd('y.txt', '', 'y\n', 'added')])], 60);
    expect(capped.map((f) => [f.path, f.truncated, f.diff === ''])).toEqual([['x.txt', false, false], ['y.txt', true, true]]);
  });

  it('names what a redo deletes again: files the turns deleted in the end, a renamed file by its old path, none outside the workspace', () => {
    const t1 = [fd('gone.txt', 'x\n', '', 'deleted'), fd('old.md', '# A\n', '', 'deleted'), fd('new.md', '', '# A\n', 'added'), fd('../up.txt', 'u\n', '', 'deleted'), { file: 'pic.png', patch: '', additions: 0, deletions: 0, status: 'deleted' as const }];
    const t2 = [fd('back.txt', 'b\n', '', 'deleted')];
    const t3 = [fd('back.txt', '', 'b\n', 'added')];
    expect(deletedBy([t1, t2, t3]).sort()).toEqual(['gone.txt', 'old.md', 'pic.png']);
  });
});
