import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkRef, decodeTree, encodeObject, encodeTree, parseRawNumstat, splitPatch, type TreeEntry } from '../../src/core/runtime/host/workspace-snapshots.js';

/** The object encoding of the service's snapshots, checked against git's own. */
const dir = mkdtempSync(join(tmpdir(), 'snap-unit-'));
execFileSync('git', ['init', '-q', '--bare', dir]);
const git = (args: string[], input?: string | Buffer) => execFileSync('git', ['--git-dir', dir, ...args], { input, env: { PATH: process.env.PATH, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null' } }).toString().trim();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('snapshot objects', () => {
  it('a blob has the id git hash-object gives', () => {
    for (const body of ['', 'hello\n', 'no newline', '\u00e9t\u00e9 \u{1F600}\n'.repeat(100)]) {
      expect(encodeObject('blob', Buffer.from(body)).id).toBe(git(['hash-object', '--stdin'], body));
    }
    const bin = Buffer.from([0, 1, 2, 255, 0, 10]);
    expect(encodeObject('blob', bin).id).toBe(git(['hash-object', '--stdin'], bin));
  });

  it('a tree has the id git mktree gives, sorted the git way (a directory as "name/")', () => {
    const a = git(['hash-object', '-w', '--stdin'], 'a');
    const b = git(['hash-object', '-w', '--stdin'], 'b');
    const sub = git(['mktree'], `100644 blob ${a}\tx\n`);
    // "foo" (dir) sorts after "foo.txt" in git's order ("foo/" > "foo."), before it in a plain name sort.
    const entries: TreeEntry[] = [
      { mode: '40000', name: 'foo', id: sub },
      { mode: '100644', name: 'foo.txt', id: a },
      { mode: '100755', name: 'run.sh', id: b },
      { mode: '120000', name: 'link', id: b },
      { mode: '100644', name: 'Z', id: a },
    ];
    const mk = git(['mktree'], entries.map((e) => `${e.mode === '40000' ? '040000 tree' : `${e.mode} blob`} ${e.id}\t${e.name}`).join('\n') + '\n');
    const body = encodeTree(entries);
    expect(encodeObject('tree', body).id).toBe(mk);
    expect(decodeTree(body).map((e) => e.name)).toEqual(['Z', 'foo.txt', 'foo', 'link', 'run.sh']);
  });

  it('parses diff-tree --raw --numstat -z, renames included', () => {
    const out = ':100644 100644 aaa bbb M\0src/a.ts\0:000000 100644 000 ccc A\0new file.txt\0:100644 100644 ddd ddd R100\0old.md\0docs/new.md\0' +
      '3\t1\tsrc/a.ts\0' + '2\t0\tnew file.txt\0' + '0\t0\t\0old.md\0docs/new.md\0';
    expect(parseRawNumstat(out)).toEqual([
      { status: 'modified', path: 'src/a.ts', additions: 3, deletions: 1, binary: false },
      { status: 'added', path: 'new file.txt', additions: 2, deletions: 0, binary: false },
      { status: 'renamed', from: 'old.md', path: 'docs/new.md', additions: 0, deletions: 0, binary: false },
    ]);
    expect(parseRawNumstat(':000000 100644 000 eee A\0img.png\0-\t-\timg.png\0')[0]).toMatchObject({ binary: true, status: 'added' });
  });

  it('splits a patch into each file\'s hunks', () => {
    const p = 'diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\ndiff --git a/y.png b/y.png\nBinary files a/y.png and b/y.png differ\n';
    expect(splitPatch(p)).toEqual(['@@ -1 +1 @@\n-a\n+b\n', '']);
  });

  it('refuses ref names that climb or carry odd bytes', () => {
    expect(checkRef('sessions/ses_1/msg_2/before')).toBe('sessions/ses_1/msg_2/before');
    for (const bad of ['../x', 'a/../b', '/abs', 'a//b', 'a b', 'a\0b', '']) expect(() => checkRef(bad)).toThrow();
  });
});
