import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildApp } from '../../src/http/build-app.js';
import { createCodeHostApi } from '../../src/core/codehost/codehost-api.js';
import { apiBaseOf } from '../../src/core/codehost/codehost-api-fns.js';
import { startWorker } from '../../src/jobs/worker.js';
import { systemCtx } from '../../src/kernel/context.js';
import { createLogger } from '../../src/lib/logger.js';
import { processStatFields } from '../../src/lib/process-state.js';
import { startCodeHostApi } from '../fixtures/code-host-api.js';
import { startFakeLlm } from '../fixtures/fake-llm.js';
import { applyScriptedProvider, seedPeople } from '../helpers/runtime.js';
import { openCore } from '../../src/cli/open-core.js';
import { createGitConnectionsRepo } from '../../src/core/connectors/git-connections.repo.js';
import { CODE_HOST_REPLY_JOB, CODE_HOST_RUN_JOB } from '../../src/core/codehost/codehost-contract.js';
import { ensureQueues } from '../../src/jobs/boss.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { createSecretBox } from '../../src/lib/secret-box.js';
import { githubDelivery } from '../fixtures/code-host-deliveries.js';
import { api, freePort, seedTenant, signToken, startTestApp } from '../helpers/app.js';
import { cpuMs, descendantsOf, loadAvg, processTree, rssKb, runtimesOf, treeMemoryKb } from './agent-bench-utils.js';
import { median, percentile, report } from './bench-utils.js';
import { waitUntil } from '../helpers/poll.js';

const N_ACCEPT = Number(process.env.BENCH_CODEHOST_DELIVERIES ?? 500);
const MINUTES = Number(process.env.BENCH_CODEHOST_MINUTES ?? 3);
const PER_MINUTE = Number(process.env.BENCH_CODEHOST_PER_MINUTE ?? 100);
/** Distinct commenters: the intake's rate limits (per person and repository, per repository, an hour) must not refuse a run here. */
const PEOPLE = 10;

/**
 * Code-host webhooks, on PostgreSQL, with no job worker (the queue holds what the intake
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

// ---------------------------------------------------------------------------------------------------
// "Working on it" on the host with a warm runtime.

const N_WORKING = Number(process.env.BENCH_CODEHOST_WORKING ?? 20);
/** Distinct repositories: one person may have 10 runs queued per repository an hour (RATE_PER_PERSON_REPO_HOUR). */
const WORKING_REPOS = Math.max(1, Math.ceil((N_WORKING + 2) / 8));
const IDLE_MS = 5_000;
const ANSWER_WAIT_MS = Number(process.env.BENCH_CODEHOST_ANSWER_WAIT_MS ?? 30_000);

/** CPU (ms) of a process tree: each live process's own time and that of its children it has reaped (what ran and ended inside the sandbox counts). */
function treeCpuAllMs(pid: number): number {
  return [pid, ...descendantsOf(pid)].reduce((sum, p) => {
    const f = processStatFields(p);
    return f ? sum + ((Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 1000) / 100 : sum;
  }, 0);
}

/** The person's sandboxed runtime (the outermost bwrap under this process, which is serve here). */
function runtimeSandboxPid(): number | null {
  const found = runtimesOf(process.pid);
  if (found.length) return found[0]!.sandboxPid;
  const tree = processTree();
  const outer = (tree.get(process.pid) ?? []).find((p) => {
    try {
      return readFileSync(`/proc/${p}/comm`, 'utf8').trim() === 'bwrap';
    } catch {
      return false;
    }
  });
  return outer ?? null;
}

/** Whether the cgroup (v2) of a process is frozen now (the service freezes an idle runtime where it can); null when it cannot be read. */
function frozen(pid: number): boolean | null {
  try {
    const path = /^0::(.*)$/m.exec(readFileSync(`/proc/${pid}/cgroup`, 'utf8'))?.[1];
    if (path === undefined) return null;
    return /^frozen 1$/m.test(readFileSync(`/sys/fs/cgroup${path}/cgroup.events`, 'utf8'));
  } catch {
    return null;
  }
}

/** GET on a sandboxed runtime's API (its Unix socket), the body as text. */
function runtimeGet(socketPath: string, authorization: string, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.get({ socketPath, path, headers: { authorization } }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve(`${res.statusCode} ${body.slice(0, 2000)}`));
    });
    req.on('error', reject);
    req.setTimeout(5000, () => req.destroy(new Error('timed out')));
  });
}

const when = (x: number) => (Number.isNaN(x) ? `none within ${ANSWER_WAIT_MS / 1000} s` : `${x.toFixed(0)} ms`);
const ms = (xs: number[]) => `${median(xs).toFixed(0)} / ${percentile(xs, 95).toFixed(0)} / ${Math.max(...xs).toFixed(0)}`;

/**
 * 3. The "working on it" answer (≤ 2 s after the delivery with a warm runtime). The app as serve
 * runs it, in this process, on PostgreSQL: its job worker and the person's real sandboxed runtime (opencode
 * in bwrap), the scripted model on loopback, and a code host on loopback (its REST in GitHub's shape and
 * git http-backend on one port, test/fixtures/code-host-api.ts) with bare repositories. The admin turns the
 * webhook on through the admin API; the commenter is mapped to a member by their connection to the host.
 * One delivery first starts the person's runtime (its figures are printed as the cold start); then
 * N_WORKING signed GitHub `issue_comment` deliveries, each on a new issue, one after another, each waited
 * for to its end (the scripted turn is a short text: no changes, the run answers so) before the next.
 * For each: accept (the POST answered 202 `queued`), the reaction and the "Working on it" comment arriving
 * at the host, and the run's last answer. Baselines in the same run: the accept itself, and the host's
 * comment call alone (the service's REST client → the same loopback host, sent by this process).
 * CPU and memory of the serve process (this process: it also holds the loopback host, the model and the
 * client) and of the runtime's sandbox, idle for 5 s before the deliveries and during them. A run whose
 * last answer does not come within ANSWER_WAIT_MS is counted and named (with the runtime's terminals on
 * stderr) and the next delivery goes; its wait is in the CPU window. One more delivery after 12 s idle
 * (past AGENTWS_RUNTIME_FREEZE_SECONDS) is printed apart. Target: every "Working on it" ≤ 2 s.
 * Run alone: npm run bench -- codehost-working  (BENCH_CODEHOST_WORKING=n deliveries; AGENTWS_BENCH_LOG=info)
 */
export async function codeHostWorking(): Promise<boolean> {
  const TOKEN = `svc_${randomUUID().replace(/-/g, '')}`;
  const root = mkdtempSync(join(tmpdir(), 'aws-bench-codehost-'));
  const llm = await startFakeLlm();
  // AGENTWS_BENCH_LOG=<level>: the service's log on stderr (as in-process-serve.ts).
  const log = process.env.AGENTWS_BENCH_LOG ? createLogger(process.env.AGENTWS_BENCH_LOG, 2) : silentLogger;
  const t = await startTestApp({ mode: 'postgres', vars: { AGENTWS_RUNTIME_ASK_TOOLS: '' }, coreLogger: log, supervise: true });
  const fake = await startCodeHostApi({ kind: 'github', root, tokens: { [TOKEN]: 'svc-bot' } });
  let worker: Awaited<ReturnType<typeof startWorker>> | null = null;
  const load0 = loadAvg();
  try {
    await t.opened.core.startRuntime();
    worker = await startWorker(t.opened.core, t.opened.boss, log, { concurrency: t.env.config().worker.concurrency });
    const acme = await seedPeople(t, 'acme-codehost');
    const git = (args: string[], cwd?: string) => execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' } }).trim();
    const seed = join(root, 'seed');
    git(['init', '-q', '-b', 'main', seed]);
    git(['commit', '-q', '--allow-empty', '-m', 'initial'], seed);
    const repos = Array.from({ length: WORKING_REPOS }, (_, i) => `bench-org/r${i}`);
    for (const repo of repos) {
      git(['init', '-q', '--bare', '-b', 'main', join(root, `${repo}.git`)]);
      git(['push', '-q', join(root, `${repo}.git`), 'main'], seed);
    }
    // Before the person's runtime starts: its first configuration carries the host's git config.
    const name = 'corp-github';
    await t.opened.core.gitHosts.add(systemCtx(silentLogger, { tenantId: acme.tenantId }), { name, baseUrl: fake.url, token: TOKEN, access: [{ who: 'role:member', repos: ['bench-org/*'] }] });
    const hostId = (await t.opened.db.query<{ id: string }>(`update git_hosts set kind = 'github' where tenant_id = $1 and name = $2 returning id`, [acme.tenantId, name])).rows[0]!.id;
    await applyScriptedProvider(t, acme.tokens.owner, llm);
    const made = await api(t, 'POST', `/v1/admin/connectors/git/${name}/webhook/secret`, { token: acme.tokens.owner, body: { kind: 'github' } });
    if (made.status !== 201) throw new Error(`webhook secret: ${made.status} ${made.text}`);
    const { webhookUrl, secret } = made.json as { webhookUrl: string; secret: string };
    const set = await api(t, 'PUT', `/v1/admin/connectors/git/${name}/webhook`, { token: acme.tokens.owner, body: { repos: ['bench-org/*'], enabled: true } });
    if (set.status !== 200) throw new Error(`webhook: ${set.status} ${set.text}`);
    const box = createSecretBox([t.env.config().secrets.encryptionKey]);
    await t.opened.db.query(`insert into git_connections (tenant_id, host_id, user_id, account, access_sealed, scopes) values ($1, $2, $3, 'octo-hook', $4, 'repo')`, [acme.tenantId, hostId, acme.ids.mia, box.seal('unused')]);

    // When each comment and reaction reached the host (the fake's own arrays, stamped as they are filled).
    const arrived: Array<{ t: number; repo: string; number: number; body: string }> = [];
    const reacted: Array<{ t: number; repo: string; id: number }> = [];
    const pushComment = fake.comments.push.bind(fake.comments);
    fake.comments.push = (...cs) => {
      const now = performance.now();
      for (const c of cs) arrived.push({ t: now, repo: c.repo, number: c.number, body: c.body });
      return pushComment(...cs);
    };
    const pushReaction = fake.reactions.push.bind(fake.reactions);
    fake.reactions.push = (...rs) => {
      const now = performance.now();
      for (const x of rs) reacted.push({ t: now, repo: x.repo, id: x.id });
      return pushReaction(...rs);
    };
    const waitFor = <T>(what: string, find: () => T | undefined, timeoutMs = 120_000): Promise<T> =>
      waitUntil(() => `${what}; the host has: ${arrived.map((a) => `${a.repo}#${a.number} ${a.body.slice(0, 60)}`).join(' | ')}`, find, { timeoutMs, intervalMs: 5 });

    let k = 0;
    const unanswered: string[] = [];
    const deliver = async () => {
      const repo = repos[k % repos.length]!;
      k++;
      const title = `Bench issue ${k}`;
      const number = fake.addIssue(repo, { title, body: 'Please look at this.' });
      const commentId = fake.addComment(repo, number, '@agent have a look', { author: 'octo-hook' });
      llm.script([{ text: 'Looked: nothing to change.', usage: { prompt: 500, completion: 20 } }]);
      const d = githubDelivery({ secret, repo, number, title, issueBody: 'Please look at this.', comment: '@agent have a look', actor: { login: 'octo-hook', id: 5 }, commentId, webBase: fake.url, defaultBranch: 'main' });
      const t0 = performance.now();
      const res = await fetch(webhookUrl, { method: 'POST', headers: d.headers, body: d.body });
      const json = (await res.json()) as { outcome?: string };
      const tAccepted = performance.now();
      if (res.status !== 202 || json.outcome !== 'queued') throw new Error(`delivery ${k}: ${res.status} ${JSON.stringify(json)}`);
      const on = (a: { repo: string; number: number }) => a.repo === repo && a.number === number;
      const working = await waitFor(`"Working on it" on ${repo}#${number}`, () => arrived.find((a) => on(a) && a.body.startsWith('Working on it')));
      const reaction = reacted.find((x) => x.repo === repo && x.id === commentId);
      // The run's last answer: waited for up to ANSWER_WAIT_MS (then the next delivery goes; the run is counted as unanswered).
      const answer = await waitFor(`the answer on ${repo}#${number}`, () => arrived.find((a) => on(a) && /without changing any file|could not be completed|cost limit|cannot work/.test(a.body)), ANSWER_WAIT_MS).catch(() => null);
      if (answer && !/without changing any file/.test(answer.body)) throw new Error(`delivery ${k}: ${answer.body}`);
      if (!answer) {
        unanswered.push(`${repo}#${number}`);
        // What the runtime is doing meanwhile: its terminals (the service's git scripts run in one each).
        const rt = runtimesOf(process.pid)[0];
        const ptys = rt ? await runtimeGet(rt.socketPath, rt.authorization, '/pty').catch((err: Error) => err.message) : 'no runtime found';
        process.stderr.write(`  [codehost-working] no answer on ${repo}#${number} within ${ANSWER_WAIT_MS / 1000} s; the runtime's terminals: ${ptys}\n`);
      }
      return { accept: tAccepted - t0, working: working.t - t0, workingAfterAccept: working.t - tAccepted, reaction: reaction ? reaction.t - t0 : NaN, answered: answer ? answer.t - t0 : NaN };
    };

    // The first delivery starts the person's runtime: the cold figures.
    const cold = await deliver();
    const sandbox = runtimeSandboxPid();

    // Baseline: the service's REST client posting a comment on the same host (no delivery, no queue, no runtime).
    const hostApi = createCodeHostApi('github', apiBaseOf('github', fake.url), TOKEN, { webBase: fake.url });
    const base = fake.addIssue(repos[0]!, { title: 'baseline', body: '' });
    const direct: number[] = [];
    for (let i = 0; i < N_WORKING; i++) {
      const t0 = performance.now();
      await hostApi.comment({ repo: repos[0]!, projectId: null }, { type: 'issue', number: base }, `baseline ${i}`);
      direct.push(performance.now() - t0);
    }

    // Idle: nothing sent for IDLE_MS.
    const cpu = () => ({ serve: cpuMs(process.pid), runtime: sandbox ? treeCpuAllMs(sandbox) : NaN, at: performance.now() });
    const mem = () => ({ serve: rssKb(process.pid), runtime: sandbox ? treeMemoryKb(sandbox) : { rss: NaN, pss: NaN, processes: 0 } });
    await new Promise((r) => setTimeout(r, 1000));
    const i0 = cpu();
    await new Promise((r) => setTimeout(r, IDLE_MS));
    const i1 = cpu();
    const idleMem = mem();

    // The deliveries, one after another, each to its run's end.
    const runs: Array<Awaited<ReturnType<typeof deliver>>> = [];
    let peak = idleMem;
    const b0 = cpu();
    for (let i = 0; i < N_WORKING; i++) {
      runs.push(await deliver());
      const m = mem();
      if (m.serve > peak.serve || m.runtime.rss > peak.runtime.rss) peak = { serve: Math.max(m.serve, peak.serve), runtime: m.runtime.rss > peak.runtime.rss ? m.runtime : peak.runtime };
    }
    const b1 = cpu();

    // A neighbour: one more delivery once the runtime has been idle past AGENTWS_RUNTIME_FREEZE_SECONDS (10 s), frozen where the host lets the service freeze it.
    const idleSince = performance.now();
    let wasFrozen: boolean | null = null;
    while (performance.now() - idleSince < 20_000) {
      await new Promise((r) => setTimeout(r, 250));
      const states = sandbox ? [sandbox, ...descendantsOf(sandbox)].map(frozen) : [];
      wasFrozen = states.includes(true) ? true : states.includes(false) ? false : null;
      if (wasFrozen || (wasFrozen === null && performance.now() - idleSince > 12_000)) break;
      if (wasFrozen === false && performance.now() - idleSince > 15_000) break;
    }
    const idleS = (performance.now() - idleSince) / 1000;
    const afterIdle = await deliver();
    const share = (a: ReturnType<typeof cpu>, b: ReturnType<typeof cpu>, key: 'serve' | 'runtime') => `${(((b[key] - a[key]) / (b.at - a.at)) * 100).toFixed(1)}%`;
    const mb = (kb: number) => `${(kb / 1024).toFixed(0)} MB`;

    const accept = runs.map((r) => r.accept);
    const working = runs.map((r) => r.working);
    const worst = Math.max(...working);
    const answeredIn = runs.map((r) => r.answered).filter((x) => !Number.isNaN(x));
    // A run still unanswered gets one more chance to end before the count (its answer may come late).
    if (unanswered.length) await new Promise((r) => setTimeout(r, 5000));
    const sessions = Number((await t.opened.db.query(`select count(*) from code_host_runs where tenant_id = $1 and host_id = $2 and status = 'no_changes'`, [acme.tenantId, hostId])).rows[0].count);
    return report(
      `Code-host webhook: "Working on it" on the host after a signed delivery, warm runtime (in-process serve + worker on PostgreSQL, the person's sandboxed runtime, loopback GitHub-shaped host; ${N_WORKING} deliveries on new issues one after another, each run to its end)`,
      {
        'delivery -> "Working on it" p50 / p95 / max (ms)': ms(working),
        'delivery accepted (202) p50 / p95 / max (ms)': ms(accept),
        '202 -> "Working on it" p50 / p95 (ms)': `${median(runs.map((r) => r.workingAfterAccept)).toFixed(0)} / ${percentile(runs.map((r) => r.workingAfterAccept), 95).toFixed(0)}`,
        'delivery -> reaction (eyes) p50 / p95 (ms)': `${median(runs.map((r) => r.reaction)).toFixed(0)} / ${percentile(runs.map((r) => r.reaction), 95).toFixed(0)}`,
        'baseline: host comment call alone p50 / p95 (ms)': `${median(direct).toFixed(1)} / ${percentile(direct, 95).toFixed(1)}`,
        'ratio p50 working / p50 accept': `${(median(working) / median(accept)).toFixed(1)}×`,
        'ratio p50 working / host comment call': `${(median(working) / median(direct)).toFixed(1)}×`,
        'max working / the 2 s target': `${((worst / 2000) * 100).toFixed(0)}%`,
        'delivery -> the run\'s last answer p50 / max (ms)': answeredIn.length ? `${median(answeredIn).toFixed(0)} / ${Math.max(...answeredIn).toFixed(0)} (${answeredIn.length} of ${N_WORKING})` : 'none answered',
        'cold (runtime started by the first)': `accept ${cold.accept.toFixed(0)} ms, "Working on it" ${cold.working.toFixed(0)} ms, last answer ${when(cold.answered)}`,
        'after idle (runtime frozen?)': `${idleS.toFixed(0)} s idle, frozen: ${wasFrozen === null ? 'unknown' : wasFrozen ? 'yes' : 'no'}: accept ${afterIdle.accept.toFixed(0)} ms, "Working on it" ${afterIdle.working.toFixed(0)} ms, last answer ${when(afterIdle.answered)}`,
        'runs answered "no changes"': `${sessions} of ${N_WORKING + 2}${unanswered.length ? `; no answer within ${ANSWER_WAIT_MS / 1000} s: ${unanswered.join(', ')}` : ''}`,
        'CPU idle 5 s: serve / runtime': `${share(i0, i1, 'serve')} / ${share(i0, i1, 'runtime')} of a core`,
        'CPU during the deliveries: serve / runtime': `${share(b0, b1, 'serve')} / ${share(b0, b1, 'runtime')} of a core over ${((b1.at - b0.at) / 1000).toFixed(1)} s`,
        'RSS idle: serve / runtime (PSS)': `${mb(idleMem.serve)} / ${mb(idleMem.runtime.rss)} (${mb(idleMem.runtime.pss)}, ${idleMem.runtime.processes} processes)`,
        'RSS peak after a run: serve / runtime': `${mb(peak.serve)} / ${mb(peak.runtime.rss)}`,
        'load average before / after': `${load0} / ${loadAvg()}`,
      },
      { ok: worst <= 2000, target: 'every "Working on it" ≤ 2 s after its delivery (warm runtime)' },
    );
  } finally {
    await worker?.stop(2000).catch(() => {});
    await t.opened.core.stopRuntime().catch(() => {});
    await t.close();
    await llm.close();
    await fake.close();
    rmSync(root, { recursive: true, force: true });
  }
}
