import { performance } from 'node:perf_hooks';
import { openCore } from '../../src/cli/open-core.js';
import { parseConfigValues } from '../../src/config/load-config.js';
import { systemCtx } from '../../src/core/context.js';
import { silentLogger } from '../../src/core/logger.js';
import { memoryPart } from '../../src/core/sessions/prompt-parts.js';
import { TURN_MEMORIES } from '../../src/core/sessions/turn-runner.js';
import { randomSecret } from '../../src/lib/secrets.js';
import { median, percentile, report, scratchDatabase } from './bench-utils.js';

const MEMORIES = Number(process.env.BENCH_INJECTION_MEMORIES ?? 5000);
const PROMPTS = Number(process.env.BENCH_INJECTION_PROMPTS ?? 300);

const WORDS = 'deploy friday tabs spaces golang python review release database migration index backup staging production latency cache token budget invoice customer onboarding kubernetes docker terraform'.split(' ');

/**
 * What memory injection adds to a turn's start (issue 13: ≤ 20 ms p95 on prompt → runtime dispatch), on
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
    await opened.db.query(
      `insert into memories (tenant_id, user_id, kind, content, visibility)
       select $1, $2, (array['fact','preference','event','skill-note'])[1 + i % 4],
              'note ' || i || ': ' || (array[${WORDS.map((w) => `'${w}'`).join(',')}])[1 + i % ${WORDS.length}] || ' and ' ||
              (array[${WORDS.map((w) => `'${w}'`).join(',')}])[1 + (i * 7) % ${WORDS.length}] || ' matter for the team',
              'private'
       from generate_series(1, $3::int) as i`,
      [tenantId, userId, MEMORIES],
    );
    await opened.db.query('analyze memories');
    const owner = { tenantId, userId };
    const prompt = (i: number) => `Please help with the ${WORDS[i % WORDS.length]} work: check ${WORDS[(i * 3) % WORDS.length]} and write a summary of the ${WORDS[(i * 5) % WORDS.length]} changes.`;
    for (let i = 0; i < 20; i++) await core.memories.recallForTurn(owner, prompt(i), TURN_MEMORIES);
    const times: number[] = [];
    let recalled = 0;
    for (let i = 0; i < PROMPTS; i++) {
      const t0 = performance.now();
      const { memories } = await core.memories.recallForTurn(owner, prompt(i), TURN_MEMORIES);
      if (memories.length) memoryPart(memories);
      times.push(performance.now() - t0);
      recalled += memories.length;
    }
    const p95 = percentile(times, 95);
    report(
      'memory injection at turn start (PostgreSQL, full-text)',
      { memories: MEMORIES, prompts: PROMPTS, 'memories per turn (mean)': (recalled / PROMPTS).toFixed(1), 'median ms': median(times).toFixed(2), 'p95 ms': p95.toFixed(2), 'max ms': Math.max(...times).toFixed(2) },
      { ok: p95 <= 20, target: 'p95 ≤ 20 ms added to prompt → runtime dispatch (upper bound: the recall runs alongside runtime preparation)' },
    );
    return p95 <= 20;
  } finally {
    await opened.close();
    await db.drop();
  }
}
