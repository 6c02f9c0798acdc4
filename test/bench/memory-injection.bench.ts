import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { openCore } from '../../src/cli/open-core.js';
import { parseConfigValues } from '../../src/config/load-config.js';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { memoryPart } from '../../src/core/sessions/prompt-parts.js';
import { TURN_MEMORIES } from '../../src/core/sessions/turn-runner.js';
import { randomSecret } from '../../src/lib/secrets.js';
import { median, percentile, report, scratchDatabase } from './bench-utils.js';

const MEMORIES = Number(process.env.BENCH_INJECTION_MEMORIES ?? 5000);
const PROMPTS = Number(process.env.BENCH_INJECTION_PROMPTS ?? 300);

const WORDS = 'deploy friday tabs spaces golang python review release database migration index backup staging production latency cache token budget invoice customer onboarding kubernetes docker terraform'.split(' ');

/**
 * What memory injection adds to a turn's start (≤ 20 ms p95 on prompt → runtime dispatch), on
 * PostgreSQL, full-text mode (no embedder: an embedder's own latency is the provider's). The turn runner
 * starts the recall when it takes the turn and awaits it just before dispatch, alongside acquiring and
 * preparing the runtime, so what it adds is at most the recall's own time (and zero when preparation takes
 * longer); this measures that upper bound: `recallForTurn` plus building the block, for a user with
 * MEMORIES memories, over PROMPTS different prompts.
 */
export async function memoryInjection(): Promise<boolean> {
  const db = await scratchDatabase('agentws_bench_injection');
  const config = parseConfigValues({
    fileValues: { DATABASE_URL: db.url, AGENTWS_JWT_SECRET: randomSecret(32), AGENTWS_ENCRYPTION_KEY: randomSecret(32), AGENTWS_DATA_DIR: '/tmp/agentws-bench' },
    configFile: null,
    env: {},
    cwd: '/tmp',
  });
  const opened = await openCore(config, silentLogger);
  try {
    const { core } = opened;
    await core.migrator.up();
    const seeded = await core.tenants.seedTenant(systemCtx(silentLogger), { name: 'bench', slug: 'bench', ownerEmail: 'o@bench.example' });
    const tenantId = seeded.tenant.id;
    const { rows } = await opened.db.query<{ id: string }>(`select id from users where tenant_id = $1 limit 1`, [tenantId]);
    const userId = rows[0].id;
    // Two shapes of the same number of memories: "varied" (each memory 8 words of a 3,000-word vocabulary,
    // as notes about different things are), and "overlapping" (every memory 2 of 24 common words, so a
    // prompt's words match about a quarter of them all: the search must rank thousands of rows).
    const vocab = Array.from({ length: 3000 }, (_, i) => `w${i.toString(36)}x${(i * 7919 % 997).toString(36)}`);
    const owner = { tenantId, userId };
    const shapes: Array<{ name: string; content: (i: number) => string; prompt: (i: number) => string }> = [
      {
        name: 'varied',
        content: (i) => `note ${i}: ${Array.from({ length: 8 }, (_, k) => vocab[(i * 31 + k * 977) % vocab.length]).join(' ')}`,
        prompt: (i) => `Please help: ${Array.from({ length: 12 }, (_, k) => vocab[(i * 131 + k * 613) % vocab.length]).join(' ')} and summarise the changes.`,
      },
      {
        name: 'overlapping',
        content: (i) => `note ${i}: ${WORDS[i % WORDS.length]} and ${WORDS[(i * 7) % WORDS.length]} matter for the team`,
        prompt: (i) => `Please help with the ${WORDS[i % WORDS.length]} work: check ${WORDS[(i * 3) % WORDS.length]} and write a summary of the ${WORDS[(i * 5) % WORDS.length]} changes.`,
      },
    ];
    const rowsOut: Record<string, string | number> = { memories: MEMORIES, prompts: PROMPTS, 'load average (1 min) at start': loadavg()[0].toFixed(2) };
    // Baseline, same run: two round trips of a trivial statement (a recall makes two: the user's roles, the search).
    const base: number[] = [];
    for (let i = 0; i < PROMPTS; i++) {
      const t0 = performance.now();
      await opened.db.query('select 1');
      await opened.db.query('select 1');
      base.push(performance.now() - t0);
    }
    rowsOut['baseline, 2 × select 1: median / p95 ms'] = `${median(base).toFixed(2)} / ${percentile(base, 95).toFixed(2)}`;
    let p95 = 0;
    for (const shape of shapes) {
      await opened.db.query('delete from memories where tenant_id = $1', [tenantId]);
      const contents = Array.from({ length: MEMORIES }, (_, i) => shape.content(i));
      await opened.db.query(
        `insert into memories (tenant_id, user_id, kind, content, visibility)
         select $1, $2, (array['fact','preference','event','skill-note'])[1 + (n % 4)::int], c, 'private'
           from unnest($3::text[]) with ordinality as t(c, n)`,
        [tenantId, userId, contents],
      );
      await opened.db.query('analyze memories');
      for (let i = 0; i < 20; i++) await core.agentMemories.recallForTurn(owner, shape.prompt(i), TURN_MEMORIES);
      const times: number[] = [];
      let recalled = 0;
      for (let i = 0; i < PROMPTS; i++) {
        const t0 = performance.now();
        const { memories } = await core.agentMemories.recallForTurn(owner, shape.prompt(i), TURN_MEMORIES);
        if (memories.length) memoryPart(memories);
        times.push(performance.now() - t0);
        recalled += memories.length;
      }
      rowsOut[`${shape.name}: memories per turn (mean)`] = (recalled / PROMPTS).toFixed(1);
      rowsOut[`${shape.name}: median / p95 / max ms`] = `${median(times).toFixed(2)} / ${percentile(times, 95).toFixed(2)} / ${Math.max(...times).toFixed(2)}`;
      if (shape.name === 'varied') p95 = percentile(times, 95);
    }
    report('memory injection at turn start (PostgreSQL, full-text): recall + block, the most it adds to dispatch', rowsOut, {
      ok: p95 <= 20,
      target: 'p95 ≤ 20 ms (varied notes; the recall runs alongside runtime preparation, so it adds at most this)',
    });
    return p95 <= 20;
  } finally {
    await opened.close();
    await db.drop();
  }
}
