import { execFile } from 'node:child_process';
import { lstat, mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from '../../kernel/logger.js';

const run = promisify(execFile);

/**
 * A person's workspace as the host prepares it before their turns: the directory, and a git repository
 * in it (a repository makes the directory the runtime's project root; without one the runtime treats the
 * whole filesystem as the worktree).
 *
 * What the workspace holds was written by the agent, which may be hostile and may be running while this
 * runs, so the host never follows a name in it. A `.git` of any kind already there is left alone: a
 * directory, a file naming another git directory, a symlink, dangling or not (`git init` on the workspace
 * followed such a link and made a repository wherever it pointed, as the service user). A new repository
 * is made in a private directory beside the workspace, which no sandbox mounts, and renamed into place:
 * rename(2) acts on the name itself, follows no link, and replaces nothing that appeared meanwhile.
 */
export function createWorkspacePreparer(log: Logger) {
  let gitMissing = false;
  /** In-flight preparations by directory: a user's concurrent first requests share one. */
  const preparing = new Map<string, Promise<void>>();

  const exists = (path: string) => lstat(path).then(
    () => true,
    () => false,
  );

  async function prepare(dir: string): Promise<void> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    if (gitMissing || (await exists(join(dir, '.git')))) return;
    const staging = await mkdtemp(join(dirname(dir), `.${basename(dir)}.git-init-`));
    try {
      try {
        await run('git', ['init', '-q', staging]);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        gitMissing = true;
        log.warn('git is not installed: agent workspaces are not git repositories, so the runtime cannot confine its project root to them');
        return;
      }
      await rename(join(staging, '.git'), join(dir, '.git')).catch((err: NodeJS.ErrnoException) => {
        // Something named .git appeared meanwhile (another process initialised it, or the agent made one): it stays.
        if (!['EEXIST', 'ENOTEMPTY', 'ENOTDIR', 'EISDIR'].includes(err.code ?? '')) throw err;
      });
    } finally {
      await rm(staging, { recursive: true, force: true });
    }
  }

  return {
    /** Makes the workspace directory, and a git repository in it when it has no `.git` of any kind. */
    ensure(dir: string): Promise<void> {
      let p = preparing.get(dir);
      if (!p) {
        p = prepare(dir).finally(() => preparing.delete(dir));
        preparing.set(dir, p);
      }
      return p;
    },
  };
}
