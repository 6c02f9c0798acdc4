import { buildApp } from '../../src/http/build-app.js';
import { openCore } from '../../src/cli/open-core.js';
import { createGitConnectionsRepo } from '../../src/core/connectors/git-connections.repo.js';
import { CODE_HOST_REPLY_JOB, CODE_HOST_RUN_JOB } from '../../src/core/codehost/codehost-contract.js';
import { ensureQueues } from '../../src/jobs/boss.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { createSecretBox } from '../../src/lib/secret-box.js';
import { githubDelivery } from '../fixtures/code-host-deliveries.js';
import { api, freePort, seedTenant, signToken, startTestApp } from '../helpers/app.js';
import { loadAvg } from './agent-bench-utils.js';
import { median, percentile, report } from './bench-utils.js';

const N_ACCEPT = Number(process.env.BENCH_CODEHOST_DELIVERIES ?? 500);
const MINUTES = Number(process.env.BENCH_CODEHOST_MINUTES ?? 3);
const PER_MINUTE = Number(process.env.BENCH_CODEHOST_PER_MINUTE ?? 100);
/** Distinct commenters: the intake's rate limits (per person and repository, per repository, an hour) must not refuse a run here. */
const PEOPLE = 10;

/**
 * Code-host webhooks (issue 40), on PostgreSQL, with no job worker (the queue holds what the intake
 * queued: nothing runs):
 *
 * 1. a delivery accepted: a GitHub `issue_comment` signed with the host's secret, by a person mapped
 *    through their connection, on an allowed repository, POSTed one after another: the time of the POST,
 *    in which the intake verifies it, records it and queues the run in one transaction. Baseline, same
 *    serve, interleaved: `GET /v1/auth/status`. Target: p95 ≤ 50 ms.
 * 2. PER_MINUTE deliveries a minute for MINUTES minutes to **two serves** (two cores and apps on one
 *    PostgreSQL, as two `aws serve` behind a load balancer that a host's retry may reach either of), each
 *    delivery sent to both at once and one in ten sent again a little later (a host's retry): then each
 *    delivery id has one row in code_host_deliveries and one `codehost-run` job. Target: none lost, none
 *    doubled.
 */
export async function codeHostWebhooks(): Promise<boolean> {
  const t = await startTestApp({ mode: 'postgres' });
  const config = t.env.config();
  const b = await openCore(config, silentLogger);
  const appB = await buildApp(b.core, config);
  const portB = await freePort();
  await appB.listen({ host: '127.0.0.1', port: portB });
  const urlB = `http://127.0.0.1:${portB}`;
  const load0 = loadAvg();
  try {
    // The queues the intake sends to (made at start-up for the handlers the core registers; idempotent).
    await ensureQueues(t.opened.boss, [CODE_HOST_RUN_JOB, CODE_HOST_REPLY_JOB]);
    const people = Array.from({ length: PEOPLE }, (_, i) => ({ handle: `p${i}`, roles: ['member'] }));
    const acme = await seedTenant(t, 'acme', people);
    const owner = await signToken(t, { sub: acme.ids.owner, tid: acme.tenantId, roles: ['owner'], expS: Math.floor(Date.now() / 1000) + 7200 });
    const call = async (method: string, path: string, body?: unknown) => {
      const r = await api(t, method, path, { token: owner, body });
      if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${r.text}`);
      return r.json;
    };
    await call('POST', '/v1/admin/connectors/git', { name: 'github', baseUrl: 'https://github.com', token: 'ghp-bench', access: [{ who: '*', repos: ['acme/**'] }] });
    const { secret, webhookUrl } = await call('POST', '/v1/admin/connectors/git/github/webhook/secret', { kind: 'github' });
    await call('PUT', '/v1/admin/connectors/git/github/webhook', { repos: ['acme/*'] });
    const hostId = (await t.opened.db.query<{ id: string }>(`select id from git_hosts where tenant_id = $1 and name = 'github'`, [acme.tenantId])).rows[0]!.id;
    // Each person is mapped through their own connection to the host (GitHub's payloads carry no email).
    const box = createSecretBox([config.secrets.encryptionKey]);
    for (let i = 0; i < PEOPLE; i++) {
      await createGitConnectionsRepo().upsert(t.opened.db, { tenantId: acme.tenantId, hostId, userId: acme.ids[`p${i}`]!, account: `gh-p${i}`, accessSealed: box.seal('gho_bench'), refreshSealed: null, expiresAt: null, scopes: '' });
    }
    const hookPath = new URL(webhookUrl).pathname;
    let n = 0;
    /** The i-th delivery of a series: each person comments once on each repository of the series. */
    const delivery = (series: string, i: number) =>
      githubDelivery({ secret, deliveryId: `${series}-${i}-${n++}`, repo: `acme/${series}${Math.floor(i / PEOPLE)}`, number: 1 + (i % 97), comment: '@agent please fix this', actor: { login: `gh-p${i % PEOPLE}`, id: 1000 + (i % PEOPLE) } });
    const post = async (base: string, d: ReturnType<typeof delivery>) => {
      const r = await fetch(`${base}${hookPath}`, { method: 'POST', headers: d.headers, body: d.body });
      const json = (await r.json()) as { outcome?: string };
      return { status: r.status, outcome: json.outcome };
    };

    // 1. Accepted: one after another, each against a GET /v1/auth/status on the same serve.
    for (let i = 0; i < 50; i++) await post(t.url, delivery('warm', i));
    const accepted: number[] = [];
    const status: number[] = [];
    const outcomes = new Map<string, number>();
    for (let i = 0; i < N_ACCEPT; i++) {
      const d = delivery('a', i);
      let t0 = performance.now();
      const r = await post(t.url, d);
      accepted.push(performance.now() - t0);
      outcomes.set(`${r.status} ${r.outcome}`, (outcomes.get(`${r.status} ${r.outcome}`) ?? 0) + 1);
      t0 = performance.now();
      await fetch(`${t.url}/v1/auth/status`).then((x) => x.arrayBuffer());
      status.push(performance.now() - t0);
    }
    const queuedA = Number((await t.opened.db.query(`select count(*) from pgboss.job where name = 'codehost-run' and data->'trigger'->>'deliveryId' like 'a-%'`)).rows[0].count);
    const p95 = percentile(accepted, 95);
    const ok1 = report(
      `Code-host webhook: a delivery accepted (verified, recorded, run queued), in-process serve on PostgreSQL, no worker (${N_ACCEPT} GitHub issue_comment deliveries one after another)`,
      {
        'POST p50 / p95 / max (ms)': `${median(accepted).toFixed(1)} / ${p95.toFixed(1)} / ${Math.max(...accepted).toFixed(1)}`,
        'baseline GET /v1/auth/status p50 / p95 (ms)': `${median(status).toFixed(1)} / ${percentile(status, 95).toFixed(1)}`,
        'p95 delivery / p95 auth status': `${(p95 / percentile(status, 95)).toFixed(1)}×`,
        'answers': [...outcomes].map(([k, v]) => `${k}: ${v}`).join(', '),
        'codehost-run jobs queued': `${queuedA} of ${N_ACCEPT}`,
        'load average before / after': `${load0} / ${loadAvg()}`,
      },
      { ok: p95 <= 50 && queuedA === N_ACCEPT, target: 'p95 ≤ 50 ms, every delivery queued' },
    );

    // 2. Two serves, each delivery to both, one in ten again later.
    const total = Math.round(PER_MINUTE * MINUTES);
    const gap = 60_000 / PER_MINUTE;
    const sent: string[] = [];
    const pending: Array<Promise<unknown>> = [];
    const answers = new Map<string, number>();
    const count = (r: { status: number; outcome?: string }) => answers.set(`${r.status} ${r.outcome}`, (answers.get(`${r.status} ${r.outcome}`) ?? 0) + 1);
    let resent = 0;
    const started = performance.now();
    for (let i = 0; i < total; i++) {
      const d = delivery('s', i);
      sent.push(d.deliveryId);
      pending.push(Promise.all([post(t.url, d), post(urlB, d)]).then((rs) => rs.forEach(count)));
      if (i % 10 === 3) {
        resent++;
        // The host retries after a while, to whichever serve the balancer picks.
        pending.push(new Promise((r) => setTimeout(r, 1000 + (i % 7) * 500)).then(() => post(i % 2 ? urlB : t.url, d).then(count)));
      }
      const next = started + (i + 1) * gap;
      await new Promise((r) => setTimeout(r, Math.max(0, next - performance.now())));
    }
    await Promise.all(pending);
    const elapsedS = (performance.now() - started) / 1000;
    const rows = (await t.opened.db.query<{ deliveries: string; distinct: string; replays: string }>(
      `select count(*) as deliveries, count(distinct delivery_id) as distinct, coalesce(sum(replays), 0) as replays from code_host_deliveries where host_id = $1 and delivery_id like 's-%'`,
      [hostId],
    )).rows[0]!;
    const jobs = (await t.opened.db.query<{ jobs: string; distinct: string }>(
      `select count(*) as jobs, count(distinct data->'trigger'->>'deliveryId') as distinct from pgboss.job where name = 'codehost-run' and data->'trigger'->>'deliveryId' like 's-%'`,
    )).rows[0]!;
    const lost = total - Number(jobs.distinct);
    const doubled = Number(jobs.jobs) - Number(jobs.distinct) + (Number(rows.deliveries) - Number(rows.distinct));
    const ok2 = report(
      `Code-host webhook: ${PER_MINUTE} deliveries a minute for ${MINUTES} min to two serves on one PostgreSQL, each sent to both, one in ten again later`,
      {
        'deliveries (distinct ids) / POSTs': `${total} / ${2 * total + resent} in ${elapsedS.toFixed(0)} s`,
        'answers': [...answers].map(([k, v]) => `${k}: ${v}`).join(', '),
        'code_host_deliveries rows (distinct ids)': `${rows.deliveries} (${rows.distinct}), replays counted ${rows.replays}`,
        'codehost-run jobs (distinct ids)': `${jobs.jobs} (${jobs.distinct})`,
        'baseline: deliveries sent': total,
        'lost / doubled': `${lost} / ${doubled}`,
        'load average before / after': `${load0} / ${loadAvg()}`,
      },
      { ok: lost === 0 && doubled === 0 && Number(rows.deliveries) === total && Number(rows.replays) === total + resent, target: 'none lost, none doubled (each id: one row, one run job)' },
    );
    return ok1 && ok2;
  } finally {
    await appB.close();
    await b.close();
    await t.close();
  }
}
