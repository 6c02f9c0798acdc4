import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, linkSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync, lstatSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { changes, encodeObject, flatten, listRefs, pruneOldest, restore, snapshot } from '../../src/core/runtime/host/workspace-snapshots.js';

/**
 * The service's snapshots on a real directory, with what a hostile agent can plant: links and hard links
 * to files outside, a directory swapped for a link to outside during a snapshot and a restore, a `.git`
 * with hooks and fsmonitor at the top and in a subfolder. Nothing outside is read or written, and no
 * code of the workspace's runs.
 */
const base = mkdtempSync(join(tmpdir(), 'snap-host-'));
const outside = join(base, 'outside');
const marker = join(base, 'ran');
let ws: string;
let store: string;
let n = 0;
mkdirSync(outside);
writeFileSync(join(outside, 'secret.txt'), 'TOP SECRET of another person\n');
afterAll(() => rmSync(base, { recursive: true, force: true }));
beforeEach(() => {
  n++;
  ws = join(base, `ws${n}`);
  store = join(base, `store${n}`, 'snapshots.git');
  mkdirSync(ws);
});
const secretId = encodeObject('blob', readFileSync(join(outside, 'secret.txt'))).id;
const hasObject = (id: string) => existsSync(join(store, 'objects', id.slice(0, 2), id.slice(2)));

describe('workspace snapshots on the host', () => {
  it('keeps files, links as links, skips .git, hard links, special and large files; diffs and restores', async () => {
    mkdirSync(join(ws, 'src'));
    writeFileSync(join(ws, 'src', 'a.ts'), 'one\ntwo\nthree\n');
    writeFileSync(join(ws, 'run.sh'), '#!/bin/sh\n');
    chmodSync(join(ws, 'run.sh'), 0o755);
    writeFileSync(join(ws, 'old.md'), 'a document long enough to be found renamed\n'.repeat(5));
    symlinkSync(join(outside, 'secret.txt'), join(ws, 'to-secret'));
    linkSync(join(outside, 'secret.txt'), join(ws, 'hard'));
    execFileSync('mkfifo', [join(ws, 'fifo')]);
    // A clone in a subfolder: its files kept one by one, its .git not.
    mkdirSync(join(ws, 'clone', '.git'), { recursive: true });
    writeFileSync(join(ws, 'clone', '.git', 'config'), '[core]\n\tfsmonitor = touch ' + marker + '\n');
    writeFileSync(join(ws, 'clone', 'README'), 'cloned\n');
    const before = await snapshot(ws, store, ['t/1/before']);
    const kept = await flatten(store, before.tree);
    expect([...kept.keys()].sort()).toEqual(['clone/README', 'old.md', 'run.sh', 'src/a.ts', 'to-secret']);
    expect(kept.get('run.sh')!.mode).toBe('100755');
    expect(kept.get('to-secret')!.mode).toBe('120000');
    expect(before.skipped).toMatchObject({ hardLinked: 1, special: 1 });
    expect(hasObject(secretId)).toBe(false);

    writeFileSync(join(ws, 'src', 'a.ts'), 'one\nTWO\nthree\nfour\n');
    rmSync(join(ws, 'old.md'));
    writeFileSync(join(ws, 'new.md'), 'a document long enough to be found renamed\n'.repeat(5));
    writeFileSync(join(ws, 'img.bin'), Buffer.from([0, 1, 2, 3, 0, 255]));
    writeFileSync(join(ws, 'clone', 'README'), 'cloned and changed\n');
    const after = await snapshot(ws, store, ['t/1/after']);
    expect(after.files).toBe(5);
    const c = await changes(store, before.tree, after.tree, { patch: true });
    const by = Object.fromEntries(c.files.map((f) => [f.path, f]));
    expect(by['src/a.ts']).toMatchObject({ status: 'modified', additions: 2, deletions: 1 });
    expect(by['src/a.ts'].diff).toContain('--- a/src/a.ts\n+++ b/src/a.ts\n@@');
    expect(by['src/a.ts'].diff).toContain('+TWO');
    expect(by['new.md']).toMatchObject({ status: 'renamed', from: 'old.md' });
    expect(by['img.bin']).toMatchObject({ status: 'added', binary: true, diff: '' });
    expect(by['clone/README']).toMatchObject({ status: 'modified' });
    expect(existsSync(marker)).toBe(false);

    // Undo: back to before; the redo point is the state just before.
    const r = await restore(ws, store, before.tree, 't/redo');
    expect(r.failed).toEqual([]);
    expect(readFileSync(join(ws, 'src', 'a.ts'), 'utf8')).toBe('one\ntwo\nthree\n');
    expect(existsSync(join(ws, 'old.md'))).toBe(true);
    expect(existsSync(join(ws, 'new.md'))).toBe(false);
    expect(existsSync(join(ws, 'img.bin'))).toBe(false);
    expect(readlinkSync(join(ws, 'to-secret'))).toBe(join(outside, 'secret.txt'));
    // Not kept, so left alone: the hard link and the fifo are still there.
    expect(statSync(join(ws, 'hard')).nlink).toBe(2);
    expect(lstatSync(join(ws, 'fifo')).isFIFO()).toBe(true);
    // Redo.
    await restore(ws, store, r.before, 't/redo2');
    expect(readFileSync(join(ws, 'src', 'a.ts'), 'utf8')).toBe('one\nTWO\nthree\nfour\n');
    expect(existsSync(join(ws, 'old.md'))).toBe(false);
    expect(readFileSync(join(ws, 'img.bin'))).toEqual(Buffer.from([0, 1, 2, 3, 0, 255]));
    expect(statSync(join(ws, 'run.sh')).mode & 0o777).toBe(0o755);
    expect(readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET of another person\n');
    expect(existsSync(marker)).toBe(false);
  });

  it('a restore writes through no link: a file target replaced by a link to outside is replaced, not written through', async () => {
    writeFileSync(join(ws, 'f.txt'), 'mine\n');
    const s = await snapshot(ws, store, []);
    rmSync(join(ws, 'f.txt'));
    symlinkSync(join(outside, 'secret.txt'), join(ws, 'f.txt'));
    // A directory the target has, now a link to outside: refused, nothing written there.
    mkdirSync(join(ws, 'd'));
    writeFileSync(join(ws, 'd', 'x'), 'x\n');
    const s2 = await snapshot(ws, store, []);
    rmSync(join(ws, 'd'), { recursive: true });
    symlinkSync(outside, join(ws, 'd'));
    await restore(ws, store, s2.tree, 'r');
    expect(readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET of another person\n');
    expect(readdirSync(outside)).toEqual(['secret.txt']);
    const r = await restore(ws, store, s.tree, 'r');
    expect(lstatSync(join(ws, 'f.txt')).isSymbolicLink()).toBe(false);
    expect(readFileSync(join(ws, 'f.txt'), 'utf8')).toBe('mine\n');
    expect(readFileSync(join(outside, 'secret.txt'), 'utf8')).toBe('TOP SECRET of another person\n');
    expect(readdirSync(outside)).toEqual(['secret.txt']);
    expect(r.failed).toEqual([]);
  });

  it('a directory swapped for a link to outside during snapshots and restores: nothing outside read or written', async () => {
    const deep = join(ws, 'deep');
    mkdirSync(deep);
    for (let i = 0; i < 20; i++) writeFileSync(join(deep, `f${i}.txt`), `inside ${i}\n`);
    // Outside: a file named as one inside, so a walk that followed the link would store its bytes.
    writeFileSync(join(outside, 'f5.txt'), 'TOP SECRET of another person\n');
    const target = (await snapshot(ws, store, [])).tree;
    // The agent's side, in a process of its own: the directory swapped for a link to outside and back, again and again.
    const count = join(base, `swaps${n}`);
    const swapper = spawn('/bin/sh', ['-c', `i=0; while :; do mv ${deep} ${deep}.x && ln -s ${outside} ${deep} && rm ${deep} && mv ${deep}.x ${deep}; i=$((i+1)); echo $i > ${count}.t && mv ${count}.t ${count}; done`], { stdio: 'ignore' });
    try {
      for (let i = 0; i < 30; i++) {
        await snapshot(ws, store, []).catch(() => null);
        await restore(ws, store, target, 'r').catch(() => null);
      }
    } finally {
      // The count is renamed into place whole, so a kill mid-write never leaves it empty (a loaded CI run read 0).
      const exited = new Promise((resolve) => swapper.once('exit', resolve));
      swapper.kill('SIGKILL');
      await exited;
    }
    const swaps = Number(readFileSync(count, 'utf8'));
    expect(swaps).toBeGreaterThan(3);
    expect(hasObject(secretId)).toBe(false);
    expect(readdirSync(outside).sort()).toEqual(['f5.txt', 'secret.txt']);
    expect(readFileSync(join(outside, 'f5.txt'), 'utf8')).toBe('TOP SECRET of another person\n');
    rmSync(join(outside, 'f5.txt'));
  });

  it('a planted .git (hooks, fsmonitor, attributes with a filter) at the top runs nothing while diffing', async () => {
    mkdirSync(join(ws, '.git', 'hooks'), { recursive: true });
    writeFileSync(join(ws, '.git', 'config'), `[core]\n\tfsmonitor = touch ${marker}\n\thooksPath = /tmp\n[diff "x"]\n\ttextconv = touch ${marker}\n[alias]\n\tdiff-tree = !touch ${marker}\n`);
    writeFileSync(join(ws, '.git', 'hooks', 'post-checkout'), `#!/bin/sh\ntouch ${marker}\n`);
    chmodSync(join(ws, '.git', 'hooks', 'post-checkout'), 0o755);
    writeFileSync(join(ws, '.gitattributes'), '* diff=x filter=x\n');
    writeFileSync(join(ws, 'a.txt'), 'a\n');
    const a = await snapshot(ws, store, []);
    writeFileSync(join(ws, 'a.txt'), 'b\n');
    const b = await snapshot(ws, store, []);
    const c = await changes(store, a.tree, b.tree, { patch: true });
    expect(c.files.map((f) => f.path)).toEqual(['a.txt']);
    expect(c.files[0].diff).toContain('+b');
    await restore(ws, store, a.tree, 'r');
    expect(readFileSync(join(ws, 'a.txt'), 'utf8')).toBe('a\n');
    expect(existsSync(marker)).toBe(false);
  });

  it('keeps a bounded history: past the most refs, the oldest turns and the objects only they named go, the rest still diff and restore', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) {
      writeFileSync(join(ws, 'churn.txt'), `version ${i}\n`);
      ids.push((await snapshot(ws, store, [`sessions/s/m${i}/after`])).tree);
    }
    const oldBlob = encodeObject('blob', Buffer.from('version 0\n')).id;
    expect(hasObject(oldBlob)).toBe(true);
    await pruneOldest(store, 4);
    const left = Object.keys(await listRefs(store, 'sessions/s'));
    expect(left.sort()).toEqual(['m5/after', 'm6/after', 'm7/after']);
    // What only the dropped turns held is gone; the kept ones still diff, restore, and the cache still serves.
    expect(hasObject(oldBlob)).toBe(false);
    expect((await changes(store, ids[5], ids[7], { patch: true })).files.map((f) => f.path)).toEqual(['churn.txt']);
    await restore(ws, store, ids[6], 'sessions/s/redo');
    expect(readFileSync(join(ws, 'churn.txt'), 'utf8')).toBe('version 6\n');
    const again = await snapshot(ws, store, ['sessions/s/m8/after']);
    expect((await flatten(store, again.tree)).has('churn.txt')).toBe(true);
  });
});
