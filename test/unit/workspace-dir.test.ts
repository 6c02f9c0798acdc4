import { existsSync, lstatSync, mkdirSync, mkdtempSync, readlinkSync, rmSync, symlinkSync, writeFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/kernel/logger.js';
import { createWorkspacePreparer } from '../../src/core/sessions/workspace-dir.js';

/**
 * The host prepares a person's workspace (a directory and a git repository in it) before their turns,
 * while their agent, which may be hostile, can write in it: a `.git` the agent planted must never make
 * the host write anywhere else.
 */
describe('workspace preparation', () => {
  let root: string;
  let ws: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'agentws-ws-'));
    ws = join(root, 'workspaces', 't1', 'u1');
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('makes the directory and a git repository in it, and leaves nothing beside it', async () => {
    await createWorkspacePreparer(silentLogger).ensure(ws);
    expect(lstatSync(join(ws, '.git')).isDirectory()).toBe(true);
    expect(existsSync(join(ws, '.git', 'HEAD'))).toBe(true);
    expect(readdirSync(join(root, 'workspaces', 't1'))).toEqual(['u1']);
  });

  it('a dangling .git symlink the agent planted makes nothing where it points', async () => {
    mkdirSync(ws, { recursive: true });
    const target = join(root, 'host', 'planted');
    symlinkSync(target, join(ws, '.git'));
    await createWorkspacePreparer(silentLogger).ensure(ws);
    expect(existsSync(target)).toBe(false);
    expect(existsSync(join(root, 'host'))).toBe(false);
    expect(readlinkSync(join(ws, '.git'))).toBe(target);
  });

  it('a .git file naming another git directory makes nothing there', async () => {
    mkdirSync(ws, { recursive: true });
    const target = join(root, 'elsewhere');
    writeFileSync(join(ws, '.git'), `gitdir: ${target}\n`);
    await createWorkspacePreparer(silentLogger).ensure(ws);
    expect(existsSync(target)).toBe(false);
  });

  it('a repository already there is left as it is; concurrent calls share one preparation', async () => {
    const prep = createWorkspacePreparer(silentLogger);
    await Promise.all([prep.ensure(ws), prep.ensure(ws), prep.ensure(ws)]);
    writeFileSync(join(ws, '.git', 'mine'), 'x');
    await prep.ensure(ws);
    expect(existsSync(join(ws, '.git', 'mine'))).toBe(true);
  });
});
