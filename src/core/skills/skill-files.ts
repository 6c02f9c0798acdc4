import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Database } from '../../db/database.js';
import type { Clock } from '../../lib/clock.js';
import type { Logger } from '../../kernel/logger.js';
import type { SkillsRepo } from './skills.repo.js';

/** The generation of skill files before the current one stays this long (runtimes mid-turn still read it). */
const PREVIOUS_GENERATION_MS = 10 * 60_000;
/**
 * The promoted skills on disk: SKILL.md trees in the tenant's shared directory (mounted read-only in
 * every sandbox of the tenant), one directory per generation of what is promoted, the previous
 * generation kept a while for runtimes in the middle of a turn.
 */
export function createSkillFiles(deps: {
  db: Database;
  repo: Pick<SkillsRepo, 'forRuntimes'>;
  clock: Clock;
  log: Logger;
  /** The tenant's shared directory on the host (mounted read-only in every sandbox of the tenant). */
  tenantDir: (tenantId: string) => string;
}) {
  const { db, repo, clock, log } = deps;

  /**
   * The promoted skills as files, in a directory named after what is promoted (a "generation"): a
   * runtime's configuration names the directory, so a promotion or deprecation changes the
   * configuration, which makes every runtime reload its skills at its next turn. Written when missing
   * (the first runtime configured after a promotion, or the promotion itself).
   */
  async function materialise(tenantId: string): Promise<{ dir: string | null; allow: string[]; deny: string[] }> {
    const { promoted, others } = await repo.forRuntimes(db, tenantId);
    if (!promoted.length) return { dir: null, allow: [], deny: others };
    const generation = createHash('sha256')
      .update(JSON.stringify(promoted.map((p) => [p.name, p.version])))
      .digest('hex')
      .slice(0, 12);
    const dir = join(skillsRoot(tenantId), generation);
    if (!existsSync(dir)) {
      // Written aside and renamed into place: a runtime scanning meanwhile sees all of it or none.
      const staging = `${dir}.${process.pid}.${Date.now()}`;
      for (const p of promoted) {
        await mkdir(join(staging, p.name), { recursive: true, mode: 0o755 });
        await writeFile(join(staging, p.name, 'SKILL.md'), p.content, { mode: 0o644 });
      }
      await rename(staging, dir).catch(async (err: NodeJS.ErrnoException) => {
        await rm(staging, { recursive: true, force: true });
        if (!existsSync(dir)) throw err; // another process wrote the same generation meanwhile
      });
    }
    return { dir, allow: promoted.map((p) => p.name), deny: others };
  }

  const skillsRoot = (tenantId: string) => join(deps.tenantDir(tenantId), 'skills');

  /** After a promotion or deprecation: the files agents load are written now (the skills service then has idle runtimes reload). */
  async function republish(tenantId: string): Promise<void> {
    await materialise(tenantId)
      .then((m) => prune(tenantId, m.dir, m.deny))
      .catch((err) => log.error({ err: (err as Error).message, tenantId }, 'could not write the tenant\'s skills'));
  }

  /**
   * After a move: generations other than `current` are removed, but the newest of them while it is
   * recent (a runtime in the middle of a turn has not reloaded yet and may list its files), and from
   * that one the skills no longer promoted are removed at once: a deprecated skill is gone from disk.
   */
  async function prune(tenantId: string, current: string | null, withdrawn: string[]): Promise<void> {
    const root = skillsRoot(tenantId);
    const entries = await readdir(root, { withFileTypes: true }).catch(() => []);
    const others = await Promise.all(
      entries.filter((e) => e.isDirectory() && join(root, e.name) !== current).map(async (e) => ({ path: join(root, e.name), at: (await stat(join(root, e.name))).mtimeMs })),
    );
    others.sort((a, b) => b.at - a.at);
    const keep = others[0] && clock.now().getTime() - others[0].at < PREVIOUS_GENERATION_MS && !basename(others[0].path).includes('.') ? others[0] : null;
    for (const o of others) {
      if (o === keep) for (const name of withdrawn) await rm(join(o.path, name), { recursive: true, force: true });
      // A staging directory is left alone while another process may still be writing it.
      else if (!basename(o.path).includes('.') || clock.now().getTime() - o.at > PREVIOUS_GENERATION_MS) await rm(o.path, { recursive: true, force: true });
    }
  }

  return { materialise, republish };
}

export type SkillFiles = ReturnType<typeof createSkillFiles>;
