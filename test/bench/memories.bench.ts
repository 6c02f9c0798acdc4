import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openCore, type OpenedCore } from '../../src/cli/open-core.js';
import { parseConfigValues } from '../../src/config/load-config.js';
import { systemCtx, type Ctx, type UserActor } from '../../src/kernel/context.js';
import { EMBED_BATCH, EMBED_MEMORIES_JOB, type BackfillData } from '../../src/core/memories/memory-indexer.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { createMemoriesRepo, type MemoriesRepo, type Viewer } from '../../src/core/memories/memories.repo.js';
import { candidateCount, type MemoryKind, type MemoryVisibility } from '../../src/core/memories/memory-fns.js';
import { randomSecret } from '../../src/lib/secrets.js';
import { fakeEmbedding, startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';
import { loadAvg } from './agent-bench-utils.js';
import { median, percentile, report, scratchDatabase } from './bench-utils.js';

/**
 * Long-term memories, through the real service and repository code:
 *
 * 1. PostgreSQL, ROWS memories in one tenant (USERS users in teams, a mix of kinds, visibilities and
 *    statuses, generated prose over TOPICS topics so full-text has selectivity), DIMS-dimensional vectors
 *    made by the scripted embedder's function (fakeEmbedding: the vectors the service's own query
 *    embedding is compared with), bulk-loaded with multi-row unnest inserts, then vacuumed (what
 *    autovacuum does after a bulk load):
 *    - `q` search as a signed-in user (core.memories.list, hybrid: the query embedded by the scripted
 *      embedder over loopback, then one statement): p50/p95, target p95 <= 20 ms; the repository's
 *      statement alone (query vector in hand) and a primary-key lookup are measured alongside;
 *    - vector recall@10 (repo.search with a text no memory contains, so the ranking is the vector arm's)
 *      with its short list by binary codes against every visible memory ranked by exact cosine
 *      distance (codeScan `off`): >= 0.95. Ties at
 *      the 10th distance count as hits;
 *    - filters matching ~5 % of the rows (an admin asking for kind=skill-note; a member asking for
 *      visibility=team): every query must return the full `limit`, also when the text matches no word
 *      (the vector arm alone);
 *    - turn start: core.agentMemories.recallForTurn(owner, prompt, {limit: 5, maxTokens: 800}): p50/p95,
 *      target p95 <= 20 ms (what memory injection adds before dispatch), against a primary-key lookup.
 *    - the same recall@10 on a second tenant of ROWS memories with dense, topically clustered vectors
 *      (part `dense`), a second shape of data: topics and words as a model's vectors cluster.
 * 2. The embedded database (PGlite), EMBEDDED_ROWS memories, the same measurements; target p95 <= 100 ms
 *    for search, <= 20 ms for the turn's recall.
 * 3. The `embed-memories` backfill job (its real handler) over BACKFILL memories against the scripted
 *    embedder (in this process, fake-embed-DIMS): memories/s, target >= 500/s. Baseline:
 *    the scripted embedder's raw throughput, called directly with the same batches (EMBED_BATCH texts).
 *
 * Parameters (environment):
 *   BENCH_MEMORIES_PARTS          pg,backfill,dense,embedded (which parts run; `dense`: recall@10 on ROWS
 *                                 dense, topically clustered vectors, see denseVector)
 *   BENCH_MEMORIES_ROWS           100000  memories on PostgreSQL
 *   BENCH_MEMORIES_EMBEDDED_ROWS  10000   memories on the embedded database
 *   BENCH_MEMORIES_DIMS           1536    vector dimensions (the scripted model fake-embed-<DIMS>)
 *   BENCH_MEMORIES_QUERIES        300     timed searches (and as many turn recalls) per database
 *   BENCH_MEMORIES_RECALL         100     queries for recall@10
 *   BENCH_MEMORIES_FILTERED       100     queries per filter shape
 *   BENCH_MEMORIES_BACKFILL       5000    memories per backfill variant
 *   BENCH_MEMORIES_KEEP           (unset) set: keep the PostgreSQL scratch database and print its URL
 */
const PARTS = (process.env.BENCH_MEMORIES_PARTS ?? 'pg,backfill,dense,embedded').split(',');
const ROWS = Number(process.env.BENCH_MEMORIES_ROWS ?? 100_000);
const EMBEDDED_ROWS = Number(process.env.BENCH_MEMORIES_EMBEDDED_ROWS ?? 10_000);
const DIMS = Number(process.env.BENCH_MEMORIES_DIMS ?? 1536);
const QUERIES = Number(process.env.BENCH_MEMORIES_QUERIES ?? 300);
const RECALL_QUERIES = Number(process.env.BENCH_MEMORIES_RECALL ?? 100);
const FILTERED = Number(process.env.BENCH_MEMORIES_FILTERED ?? 100);
const BACKFILL = Number(process.env.BENCH_MEMORIES_BACKFILL ?? 5000);
const USERS = 40;
const TEAM_SIZE = 5;
const MODEL = `fake-embed-${DIMS}`;
/** A word no generated memory contains: with it the full-text arm finds nothing, the vector arm answers alone. */
const NO_WORD = 'zyxwvutsrq';

// ---------------------------------------------------------------------------------------------------
// Generated memories: deterministic prose over topics, so that words select and vectors cluster.

function rng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
type Rand = () => number;
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];

const TOPICS: Record<string, string[]> = {
  postgres: ['postgres', 'replication', 'vacuum', 'autovacuum', 'planner', 'wal', 'pgbouncer', 'partition', 'schema', 'migration', 'deadlock', 'index', 'replica', 'failover'],
  kubernetes: ['kubernetes', 'cluster', 'pod', 'helm', 'ingress', 'namespace', 'kubectl', 'node', 'autoscaler', 'deployment', 'secret', 'configmap', 'rollout', 'probe'],
  frontend: ['react', 'component', 'css', 'layout', 'typescript', 'bundle', 'vite', 'storybook', 'accessibility', 'render', 'hook', 'tailwind', 'webpack', 'hydration'],
  billing: ['invoice', 'billing', 'stripe', 'refund', 'subscription', 'tax', 'vat', 'receipt', 'payment', 'currency', 'dunning', 'pricing', 'coupon', 'ledger'],
  security: ['security', 'token', 'oauth', 'certificate', 'tls', 'audit', 'vulnerability', 'patch', 'firewall', 'secrets', 'rotation', 'phishing', 'mfa', 'sso'],
  travel: ['flight', 'hotel', 'visa', 'airport', 'layover', 'passport', 'lisbon', 'tokyo', 'berlin', 'train', 'luggage', 'itinerary', 'jetlag', 'boarding'],
  food: ['vegetarian', 'coffee', 'espresso', 'lunch', 'allergy', 'gluten', 'sushi', 'pasta', 'dinner', 'restaurant', 'recipe', 'tea', 'spicy', 'breakfast'],
  fitness: ['running', 'marathon', 'cycling', 'gym', 'yoga', 'swimming', 'injury', 'knee', 'training', 'stretching', 'climbing', 'rowing', 'tennis', 'hiking'],
  meetings: ['standup', 'retro', 'meeting', 'agenda', 'calendar', 'timezone', 'sync', 'demo', 'notes', 'recording', 'slack', 'zoom', 'offsite', 'planning'],
  observability: ['grafana', 'prometheus', 'alert', 'dashboard', 'latency', 'tracing', 'opentelemetry', 'logs', 'metrics', 'pager', 'incident', 'slo', 'oncall', 'sentry'],
  ml: ['model', 'training', 'embedding', 'dataset', 'gpu', 'inference', 'finetune', 'tokenizer', 'evaluation', 'prompt', 'checkpoint', 'pytorch', 'notebook', 'benchmark'],
  mobile: ['ios', 'android', 'swift', 'kotlin', 'testflight', 'simulator', 'push', 'notification', 'appstore', 'crash', 'gradle', 'xcode', 'permissions', 'offline'],
  writing: ['documentation', 'readme', 'changelog', 'tone', 'draft', 'review', 'style', 'glossary', 'tutorial', 'blog', 'copy', 'grammar', 'outline', 'headline'],
  hiring: ['interview', 'candidate', 'onboarding', 'offer', 'recruiter', 'referral', 'resume', 'mentor', 'probation', 'salary', 'promotion', 'feedback', 'ladder', 'intern'],
  networking: ['dns', 'vpn', 'router', 'subnet', 'proxy', 'loadbalancer', 'nginx', 'cdn', 'ipv6', 'bandwidth', 'packet', 'wireguard', 'cloudflare', 'timeout'],
  git: ['git', 'rebase', 'merge', 'branch', 'commit', 'review', 'pullrequest', 'monorepo', 'bisect', 'cherrypick', 'hook', 'signing', 'submodule', 'conflict'],
  family: ['daughter', 'son', 'school', 'birthday', 'anniversary', 'vacation', 'dentist', 'holiday', 'grandparents', 'piano', 'soccer', 'pickup', 'babysitter', 'weekend'],
  finance: ['budget', 'forecast', 'expense', 'quarter', 'revenue', 'runway', 'spreadsheet', 'reimbursement', 'audit', 'accrual', 'payroll', 'cashflow', 'margin', 'board'],
  storage: ['s3', 'bucket', 'backup', 'snapshot', 'retention', 'archive', 'glacier', 'disk', 'raid', 'zfs', 'replication', 'restore', 'encryption', 'lifecycle'],
  ci: ['pipeline', 'github', 'actions', 'runner', 'cache', 'flaky', 'test', 'coverage', 'lint', 'artifact', 'release', 'docker', 'image', 'registry'],
};
const TOPIC_NAMES = Object.keys(TOPICS);
const PROJECTS = ['atlas', 'borealis', 'cobalt', 'delta', 'ember', 'fjord', 'granite', 'harbor', 'iris', 'juniper', 'kestrel', 'lumen'];
const COMMON = ['usually', 'always', 'prefers', 'likes', 'needs', 'important', 'remember', 'weekly', 'team', 'customer', 'production', 'staging', 'morning', 'evening', 'quickly', 'carefully', 'new', 'old', 'shared', 'manual'];
const VERBS = ['fixed', 'reviewed', 'configured', 'migrated', 'debugged', 'planned', 'documented', 'scheduled', 'approved', 'tested', 'upgraded', 'moved'];
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];

function words(r: Rand, topic: string, n: number): string[] {
  const own = TOPICS[topic];
  // Mostly the topic's words, sometimes a neighbouring topic's: topics overlap as real notes do.
  return Array.from({ length: n }, () => (r() < 0.85 ? pick(r, own) : pick(r, TOPICS[pick(r, TOPIC_NAMES)])));
}

function memoryText(r: Rand, kind: MemoryKind, topic = pick(r, TOPIC_NAMES)): string {
  const w = words(r, topic, 6);
  const project = pick(r, PROJECTS);
  const c = () => pick(r, COMMON);
  switch (kind) {
    case 'fact':
      return `The ${project} ${w[0]} ${pick(r, VERBS)} uses ${w[1]} and ${w[2]}; ${c()} check the ${w[3]} before touching ${w[4]} in ${c()} ${w[5]}.`;
    case 'preference':
      return `${c()} prefers ${w[0]} over ${w[1]} for ${w[2]} work, and wants ${w[3]} ${w[4]} kept ${c()}; dislikes ${w[5]}.`;
    case 'event':
      return `On ${1 + Math.floor(r() * 28)} ${pick(r, MONTHS)} the ${project} team ${pick(r, VERBS)} the ${w[0]} ${w[1]} after a ${w[2]} problem with ${w[3]}; follow-up on ${w[4]} ${w[5]}.`;
    case 'skill-note':
      return `How to handle ${w[0]} ${w[1]}: first ${pick(r, VERBS)} the ${w[2]}, then check ${w[3]} and ${w[4]}, ${c()} note the ${w[5]} for ${project}.`;
  }
}

/** A search as a person types it: two or three words of one topic. */
function queryText(r: Rand, t = pick(r, TOPIC_NAMES)): string {
  const n = r() < 0.5 ? 2 : 3;
  return [...new Set(words(r, t, n))].join(' ');
}

/** A turn's prompt: a request in prose, naming a topic and a project. */
function promptText(r: Rand, i: number): string {
  const t = pick(r, TOPIC_NAMES);
  const w = words(r, t, 4);
  return `Can you help me with the ${w[0]} ${w[1]} on ${pick(r, PROJECTS)}? I think the ${w[2]} is wrong, and we should look at ${w[3]} too (request ${i}).`;
}

function pickKind(r: Rand): MemoryKind {
  const x = r();
  return x < 0.4 ? 'fact' : x < 0.65 ? 'preference' : x < 0.85 ? 'event' : 'skill-note';
}
function pickVisibility(r: Rand): MemoryVisibility {
  const x = r();
  return x < 0.45 ? 'private' : x < 0.75 ? 'team' : 'org';
}

/**
 * Dense vectors with topical clusters, for the 'dense' part: the scripted embedder's vectors are hashed
 * bags of words (a few dozen non-zero coordinates of 1536; a two-word query has a handful), on which
 * similarity is flat for every memory sharing no word with the query, unlike a real model's. Here a
 * text's vector is its topic's random centroid plus a random projection of its words (each word a
 * seeded random unit vector), normalised: neighbours are the same topic and shared words.
 */
const wordVectors = new Map<string, Float32Array>();
function unitRandom(seedText: string): Float32Array {
  let h = 0x811c9dc5;
  for (let i = 0; i < seedText.length; i++) h = Math.imul(h ^ seedText.charCodeAt(i), 0x01000193) >>> 0;
  const r = rng(h);
  const v = new Float32Array(DIMS);
  let n = 0;
  for (let i = 0; i < DIMS; i++) {
    // Box-Muller: Gaussian coordinates give uniformly distributed directions.
    const g = Math.sqrt(-2 * Math.log(r() + 1e-12)) * Math.cos(2 * Math.PI * r());
    v[i] = g;
    n += g * g;
  }
  n = Math.sqrt(n);
  for (let i = 0; i < DIMS; i++) v[i] /= n;
  return v;
}
function denseVector(text: string, topic: string): number[] {
  const v = new Float64Array(DIMS);
  const add = (key: string, weight: number) => {
    let u = wordVectors.get(key);
    if (!u) wordVectors.set(key, (u = unitRandom(key)));
    for (let i = 0; i < DIMS; i++) v[i] += weight * u[i];
  };
  const ws = text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  add(`topic:${topic}`, 1);
  for (const w of ws) add(w, 1 / Math.sqrt(ws.length));
  const n = Math.hypot(...v);
  return Array.from(v, (x) => x / n);
}

/** pgvector's text input, short: most coordinates of a hashed bag of words are 0. */
const literal = (v: number[], digits = 6) => `[${v.map((x) => (x === 0 ? '0' : x.toPrecision(digits))).join(',')}]`;

// ---------------------------------------------------------------------------------------------------
// The installation: a core on PostgreSQL or on the embedded database, a tenant with people and teams.

async function openOn(databaseUrl: string | null, dataDir: string): Promise<OpenedCore> {
  const config = parseConfigValues({
    fileValues: { DATABASE_URL: databaseUrl ?? '', AGENTWS_JWT_SECRET: randomSecret(32), AGENTWS_ENCRYPTION_KEY: randomSecret(32), AGENTWS_DATA_DIR: dataDir },
    configFile: null,
    env: {},
    cwd: '/tmp',
  });
  const opened = await openCore(config, silentLogger);
  await opened.core.migrator.up();
  return opened;
}

interface Person {
  id: string;
  role: 'owner' | 'admin' | 'member';
  teams: number[];
}
interface Workspace {
  tenantId: string;
  people: Person[];
  modelKey: string;
  ownerCtx: Ctx;
}

async function userCtx(o: OpenedCore, tenantId: string, userId: string, role: string): Promise<Ctx> {
  const permissions = await o.core.rbac.resolvePermissions(tenantId, [role]);
  const actor: UserActor = { kind: 'user', userId, tenantId, roles: [role], permissions, via: 'token' };
  return { tenantId, actor, requestId: crypto.randomUUID(), log: silentLogger, channel: 'web' };
}

/** A tenant with USERS people (the owner, 3 admins, members) in teams of TEAM_SIZE, its provider on the scripted server, its embedder. */
async function seedWorkspace(o: OpenedCore, slug: string, llm: FakeLlm, users = USERS): Promise<Workspace> {
  const sys = systemCtx(silentLogger);
  const seeded = await o.core.tenants.seedTenant(sys, { name: slug, slug, ownerEmail: `owner@${slug}.example` });
  const tenantId = seeded.tenant.id;
  const roleIds = Object.fromEntries(
    (await o.db.query<{ name: string; id: string }>(`select name, id from roles where tenant_id = $1`, [tenantId])).rows.map((r) => [r.name, r.id]),
  );
  const people: Person[] = [{ id: seeded.owner.id, role: 'owner', teams: [] }];
  for (let i = 1; i < users; i++) {
    const role = i < 4 ? 'admin' : 'member';
    const { rows } = await o.db.query<{ id: string }>(`insert into users (tenant_id, handle, email) values ($1, $2, $3) returning id`, [tenantId, `user${i}`, `user${i}@${slug}.example`]);
    await o.db.query(`insert into user_roles (tenant_id, user_id, role_id, assigned_by) values ($1, $2, $3, 'bench')`, [tenantId, rows[0].id, roleIds[role]]);
    people.push({ id: rows[0].id, role, teams: [] });
  }
  const teams = Math.ceil(users / TEAM_SIZE);
  const teamIds: string[] = [];
  for (let t = 0; t < teams; t++) {
    teamIds.push((await o.db.query<{ id: string }>(`insert into teams (tenant_id, name) values ($1, $2) returning id`, [tenantId, `team-${t}`])).rows[0].id);
  }
  people.forEach((p, i) => {
    p.teams.push(Math.floor(i / TEAM_SIZE));
    // Every fourth person is in a second team too.
    const second = (Math.floor(i / TEAM_SIZE) + 1) % teams;
    if (i % 4 === 0 && !p.teams.includes(second)) p.teams.push(second);
  });
  for (const p of people) for (const t of p.teams) await o.db.query(`insert into team_members (tenant_id, team_id, user_id) values ($1, $2, $3)`, [tenantId, teamIds[t], p.id]);

  const ownerCtx = await userCtx(o, tenantId, seeded.owner.id, 'owner');
  await o.core.providers.add(ownerCtx, { name: 'emb', kind: 'openai-compatible', baseUrl: `${llm.url}/v1`, models: [{ id: MODEL }] });
  const set = await o.core.embedders.set(ownerCtx, { provider: 'emb', model: MODEL, dimensions: DIMS });
  return { tenantId, people, modelKey: set.embedder.modelKey, ownerCtx };
}

/** Bulk-loads `rows` memories with their vectors (and so their codes), then vacuums as autovacuum would. */
async function loadMemories(
  o: OpenedCore,
  w: Workspace,
  rows: number,
  seed: number,
  vectors: { key: string; of(content: string, topic: string): number[]; digits: number } = { key: w.modelKey, of: (c) => fakeEmbedding(c, DIMS), digits: 6 },
): Promise<{ loadS: number }> {
  const r = rng(seed);
  const BATCH = 500;
  const t0 = performance.now();
  const inFlight: Promise<unknown>[] = [];
  const yearMs = 365 * 86_400_000;
  for (let start = 0; start < rows; start += BATCH) {
    const n = Math.min(BATCH, rows - start);
    const cols = { user: [] as string[], kind: [] as string[], content: [] as string[], vis: [] as string[], status: [] as string[], source: [] as string[], vec: [] as string[], at: [] as string[] };
    for (let i = 0; i < n; i++) {
      const kind = pickKind(r);
      const topic = pick(r, TOPIC_NAMES);
      const content = memoryText(r, kind, topic);
      const agent = r() < 0.1;
      cols.user.push(w.people[Math.floor(r() * w.people.length)].id);
      cols.kind.push(kind);
      cols.content.push(content);
      cols.vis.push(agent ? 'private' : pickVisibility(r));
      cols.status.push(agent && r() < 0.1 ? 'quarantined' : 'active');
      cols.source.push(agent ? 'agent' : 'api');
      cols.vec.push(literal(vectors.of(content, topic), vectors.digits));
      cols.at.push(new Date(Date.now() - r() * yearMs).toISOString());
    }
    const q = o.db.query(
      `insert into memories (tenant_id, user_id, kind, content, visibility, status, source, embedding, embedding_model, embedded_at, created_at, updated_at)
       select $1, u, k, c, v, s, src, e::vector, $2, now(), at, at
         from unnest($3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::timestamptz[]) as t(u, k, c, v, s, src, e, at)`,
      [w.tenantId, vectors.key, cols.user, cols.kind, cols.content, cols.vis, cols.status, cols.source, cols.vec, cols.at],
    );
    inFlight.push(q);
    // Two statements in flight: the next batch is generated while the database stores the last.
    if (inFlight.length >= 2) await inFlight.shift();
  }
  await Promise.all(inFlight);
  // What autovacuum does after a bulk load (migration 0010 has it vacuum memories after 1 % new rows):
  // marks the pages all-visible, so the covering code indexes are read without the heap.
  await o.db.query('vacuum analyze memories');
  const loadS = (performance.now() - t0) / 1000;
  return { loadS };
}

async function pkLookup(o: OpenedCore, id: string): Promise<number> {
  const s = performance.now();
  await o.db.query('select id from memories where id = $1', [id]);
  return performance.now() - s;
}

const ms = (xs: number[]) => `${median(xs).toFixed(2)} / ${percentile(xs, 95).toFixed(2)} / ${Math.max(...xs).toFixed(2)}`;

/** The covering code indexes' names start so (migrations/0010_memory_vector_codes.sql). */
const CODES = 'memories_codes_';

/** Whether the plan of the repo's search statement for this viewer and input uses an index whose name contains `index`. */
async function explainUses(o: OpenedCore, v: Viewer, input: Parameters<MemoriesRepo['search']>[2], index: string): Promise<boolean> {
  const repo = createMemoriesRepo();
  return o.db.transaction(async (tx) => {
    let last: { sql: string; params?: unknown[] } | null = null;
    const recorder = { query: (sql: string, params?: unknown[]) => ((last = { sql, params }), tx.query(sql, params)) } as unknown as typeof tx;
    await repo.search(recorder, v, input);
    const { sql, params } = last!;
    const { rows: plan } = await tx.query<{ 'QUERY PLAN': string }>(`explain ${sql}`, params);
    return plan.some((l) => l['QUERY PLAN'].includes(index));
  });
}

interface RecallQuery {
  typed: boolean;
  values: number[];
  viewer: Viewer;
  kind?: MemoryKind;
}

/**
 * Recall@10 of the vector arm (the repo's statement with a text no memory contains, so only vectors rank)
 * against the reference: every memory the viewer sees ranked by its exact cosine
 * distance (codeScan `off`). A memory at the reference's 10th distance (a tie) counts as a hit.
 */
async function recallOf(o: OpenedCore, key: string, queries: RecallQuery[]) {
  const repo = createMemoriesRepo();
  const input = (q: RecallQuery, codeScan?: 'off') => ({
    text: NO_WORD,
    match: 'all' as const,
    limit: 10,
    candidates: candidateCount(10),
    ...(q.kind ? { kind: q.kind } : {}),
    vector: { modelKey: key, values: q.values, codeScan },
  });
  const distances = async (ids: string[], values: number[]) =>
    new Map((await o.db.query<{ id: string; d: number }>(`select id, (embedding::vector(${DIMS})) <=> $1::vector(${DIMS}) as d from memories where id = any($2::uuid[])`, [literal(values), ids])).rows.map((x) => [x.id, x.d]));
  const referenceT: number[] = [];
  const reference: Array<{ ids: Set<string>; kth: number; n: number }> = [];
  for (const q of queries) {
    const s = performance.now();
    const got = await o.db.transaction((tx) => repo.search(tx, q.viewer, input(q, 'off')));
    referenceT.push(performance.now() - s);
    const d = await distances(got.map((m) => m.id), q.values);
    reference.push({ ids: new Set(got.map((m) => m.id)), kth: d.size ? Math.max(...d.values()) : Infinity, n: got.length });
  }
  async function recall() {
    const hits = { typed: 0, prompt: 0 };
    const total = { typed: 0, prompt: 0 };
    let full = 0;
    const t: number[] = [];
    for (const [i, q] of queries.entries()) {
      const s = performance.now();
      const got = await repo.search(o.db, q.viewer, input(q));
      t.push(performance.now() - s);
      const d = await distances(got.map((m) => m.id), q.values);
      const shape = q.typed ? 'typed' : 'prompt';
      for (const m of got) if (reference[i].ids.has(m.id) || d.get(m.id)! <= reference[i].kth + 1e-6) hits[shape]++;
      total[shape] += reference[i].n;
      if (got.length === reference[i].n) full++;
    }
    return { typed: total.typed ? hits.typed / total.typed : 1, prompt: total.prompt ? hits.prompt / total.prompt : 1, full, t };
  }
  return { ...(await recall()), referenceT };
}

// ---------------------------------------------------------------------------------------------------
// The measurements, the same on both databases.

async function measure(label: string, o: OpenedCore, w: Workspace, rows: number, targets: { search: number; turn: number }, timings: { loadS: number }): Promise<boolean> {
  const { core } = o;
  const repo = createMemoriesRepo();
  const r = rng(7);
  const anyId = (await o.db.query<{ id: string }>(`select id from memories where tenant_id = $1 limit 1`, [w.tenantId])).rows[0].id;
  const admins = w.people.filter((p) => p.role !== 'member');
  const members = w.people.filter((p) => p.role === 'member');
  const roleOf = (p: Person) => (p.role === 'owner' ? 'owner' : p.role);
  const ctxs = new Map<string, Ctx>();
  for (const p of w.people) ctxs.set(p.id, await userCtx(o, w.tenantId, p.id, roleOf(p)));
  const viewerOf = (p: Person): Viewer => {
    const perms = (ctxs.get(p.id)!.actor as UserActor).permissions.memory;
    return { tenantId: w.tenantId, userId: p.id, readOwn: perms.read_own, readTeam: perms.read_team, readOrg: perms.read_org };
  };
  // Searchers: members mostly, an admin every fourth query (admins see every org memory as well).
  const searcher = (i: number) => (i % 4 === 3 ? admins[i % admins.length] : members[i % members.length]);
  /** Whether the search statement's plan for this viewer and input uses the named index (EXPLAIN of the exact SQL the repo sends). */
  const planUses = (v: Viewer, input: Parameters<typeof repo.search>[2], index: string) => explainUses(o, v, input, index);

  // Warm-up (caches, the planner, the scripted embedder's connection).
  for (let i = 0; i < 20; i++) await core.memories.list(ctxs.get(searcher(i).id)!, { q: queryText(r), limit: 20 });

  // 1. `q` search through the service, interleaved with the repo statement alone and a primary-key lookup.
  const service: number[] = [];
  const statement: number[] = [];
  const baseline: number[] = [];
  let hybrid = 0;
  let found = 0;
  const seen = new Set<string>();
  for (let i = 0; i < QUERIES; i++) {
    let q = queryText(r);
    // Distinct texts: the service caches query vectors per text, a repeated text would skip the embedder.
    while (seen.has(q)) q = queryText(r);
    seen.add(q);
    const p = searcher(i);
    let s = performance.now();
    const res = await core.memories.list(ctxs.get(p.id)!, { q, limit: 20 });
    service.push(performance.now() - s);
    if (res.searchMode === 'hybrid') hybrid++;
    found += res.memories.length;
    const vector = { modelKey: w.modelKey, values: fakeEmbedding(q, DIMS) };
    s = performance.now();
    await repo.search(o.db, viewerOf(p), { text: q, match: 'all', limit: 20, candidates: candidateCount(20), vector });
    statement.push(performance.now() - s);
    baseline.push(await pkLookup(o, anyId));
  }
  // The part of the service path before the statement: the query's embedding (the tenant's embedder
  // looked up, the scripted embedder over loopback, the call's usage recorded).
  const embedT: number[] = [];
  for (let i = 0; i < Math.min(QUERIES, 100); i++) {
    const s = performance.now();
    await core.embeddings.embedQuery(w.tenantId, `${queryText(r)} ${i} embed`);
    embedT.push(performance.now() - s);
  }
  const planQ = queryText(r);
  const planInput = { text: planQ, match: 'all' as const, limit: 20, candidates: candidateCount(20), vector: { modelKey: w.modelKey, values: fakeEmbedding(planQ, DIMS) } };
  const planMember = await planUses(viewerOf(members[0]), planInput, CODES);
  const planAdmin = await planUses(viewerOf(admins[1]), planInput, CODES);
  const okSearch = report(
    `memories: \`q\` search over ${rows.toLocaleString('en')} memories, ${DIMS}-dim vectors (${label}, ${QUERIES} queries, limit 20)`,
    {
      'load and vacuum (s)': timings.loadS.toFixed(1),
      'service search p50 / p95 / max (ms)': ms(service),
      'search statement alone p50/p95/max (ms)': ms(statement),
      'query embedding alone p50 / p95 (ms)': `${median(embedT).toFixed(2)} / ${percentile(embedT, 95).toFixed(2)}`,
      'baseline primary-key lookup p50 / p95 (ms)': `${median(baseline).toFixed(2)} / ${percentile(baseline, 95).toFixed(2)}`,
      'ratio p95 search / p95 lookup': `${(percentile(service, 95) / percentile(baseline, 95)).toFixed(1)}x`,
      'hybrid answers / memories per answer': `${hybrid}/${QUERIES} / ${(found / QUERIES).toFixed(1)}`,
      'plan reads the covering code indexes (member / admin)': `${planMember ? 'yes' : 'NO'} / ${planAdmin ? 'yes' : 'NO'}`,
    },
    { ok: percentile(service, 95) <= targets.search && hybrid === QUERIES, target: `p95 <= ${targets.search} ms (service path, hybrid)` },
  );

  // 2. Recall@10 of the vector arm against exact ranking, for the two shapes of query text the service
  // embeds: a typed search (two or three words) and a turn's prompt.
  type Shape = 'typed' | 'prompt';
  const recallQueries = Array.from({ length: RECALL_QUERIES }, (_, i) => {
    const shape: Shape = i % 2 ? 'prompt' : 'typed';
    return { typed: shape === 'typed', values: fakeEmbedding(shape === 'typed' ? queryText(r) : promptText(r, i), DIMS), viewer: viewerOf(i % 4 < 2 ? admins[i % admins.length] : members[i % members.length]) };
  });
  const rec = await recallOf(o, w.modelKey, recallQueries);
  const recallInput = { text: NO_WORD, match: 'all' as const, limit: 10, candidates: candidateCount(10), vector: { modelKey: w.modelKey, values: recallQueries[0].values } };
  const plans = `${(await planUses(viewerOf(members[0]), recallInput, CODES)) ? 'yes' : 'NO'} / ${(await planUses(viewerOf(admins[1]), recallInput, CODES)) ? 'yes' : 'NO'}`;
  const okRecall = report(
    `memories: vector recall@10 against exact ranking (${label}, ${RECALL_QUERIES} queries, members and admins)`,
    {
      'recall@10 typed / prompts (as the service searches)': `${rec.typed.toFixed(4)} / ${rec.prompt.toFixed(4)}, p50/p95 ${median(rec.t).toFixed(2)} / ${percentile(rec.t, 95).toFixed(2)} ms`,
      'plan reads the covering code indexes (member / admin)': plans,
      'baseline: exact ranking of every visible vector p50 / p95 (ms)': `${median(rec.referenceT).toFixed(2)} / ${percentile(rec.referenceT, 95).toFixed(2)}`,
      'ratio p50 reference / short list by codes': `${(median(rec.referenceT) / median(rec.t)).toFixed(1)}x`,
    },
    { ok: rec.typed >= 0.95 && rec.prompt >= 0.95, target: 'recall@10 >= 0.95 (both shapes)' },
  );

  // 3. Filters matching ~5 % of the rows return the full limit, with words and with the vector arm alone.
  const frac = async (sql: string, params: unknown[]) => Number((await o.db.query<{ n: number }>(sql, params)).rows[0].n) / rows;
  const member = members[0];
  const teammates = w.people.filter((p) => p.teams.some((t) => member.teams.includes(t))).map((p) => p.id);
  const admin = admins[1];
  const adminMates = w.people.filter((p) => p.teams.some((t) => admin.teams.includes(t))).map((p) => p.id);
  const shapes = [
    {
      name: 'admin, kind=skill-note',
      who: admin,
      filter: { kind: 'skill-note' as const },
      frac: await frac(
        `select count(*)::int as n from memories where tenant_id = $1 and kind = 'skill-note' and (user_id = $2 or visibility = 'org' or (visibility = 'team' and user_id = any($3::uuid[])))`,
        [w.tenantId, admin.id, adminMates],
      ),
    },
    {
      name: 'member, visibility=team',
      who: member,
      filter: { visibility: 'team' as const },
      frac: await frac(`select count(*)::int as n from memories where tenant_id = $1 and visibility = 'team' and (user_id = $2 or user_id = any($3::uuid[]))`, [w.tenantId, member.id, teammates]),
    },
  ];
  const rowsOut: Record<string, string> = {};
  let okFilter = true;
  for (const shape of shapes) {
    for (const words of [true, false]) {
      let full = 0;
      const t: number[] = [];
      for (let i = 0; i < FILTERED; i++) {
        const q = words ? queryText(r) : `${NO_WORD} ${i}`;
        const s = performance.now();
        const res = await core.memories.list(ctxs.get(shape.who.id)!, { q, limit: 20, ...shape.filter });
        t.push(performance.now() - s);
        if (res.memories.length === 20) full++;
      }
      okFilter &&= full === FILTERED;
      rowsOut[`${shape.name} (${(shape.frac * 100).toFixed(1)} % of rows), ${words ? 'words' : 'vector only'}`] = `${full}/${FILTERED} full, p50/p95 ${median(t).toFixed(1)}/${percentile(t, 95).toFixed(1)} ms`;
    }
  }
  const okFilterReport = report(`memories: filters matching ~5 % of the rows (${label}, limit 20)`, rowsOut, { ok: okFilter, target: 'every query returns the full limit' });

  // 4. Turn start: the memories recalled for a prompt, against a primary-key lookup.
  const turn: number[] = [];
  const turnBase: number[] = [];
  const vecOnly: number[] = [];
  let injected = 0;
  let turnHybrid = 0;
  for (let i = 0; i < QUERIES; i++) {
    const p = searcher(i);
    const prompt = promptText(r, i);
    let s = performance.now();
    const got = await core.agentMemories.recallForTurn({ tenantId: w.tenantId, userId: p.id }, prompt, { limit: 5, maxTokens: 800 });
    turn.push(performance.now() - s);
    injected += got.memories.length;
    if (got.searchMode === 'vector') turnHybrid++;
    // What the statement costs without its full-text arm (a prompt ORs every word: thousands of rows to rank).
    const vector = { modelKey: w.modelKey, values: fakeEmbedding(prompt, DIMS) };
    s = performance.now();
    await repo.search(o.db, viewerOf(p), { text: NO_WORD, match: 'any', activeOnly: true, limit: 15, candidates: 15, vectorOnly: true, vector });
    vecOnly.push(performance.now() - s);
    turnBase.push(await pkLookup(o, anyId));
  }
  const okTurn = report(
    `memories: recall for a turn's start (${label}, ${QUERIES} prompts, limit 5, 800 tokens)`,
    {
      'recallForTurn p50 / p95 / max (ms)': ms(turn),
      'baseline primary-key lookup p50 / p95 (ms)': `${median(turnBase).toFixed(2)} / ${percentile(turnBase, 95).toFixed(2)}`,
      'by vector / memories injected per turn': `${turnHybrid}/${QUERIES} / ${(injected / QUERIES).toFixed(2)}`,
      'info: its statement, vector arm only p50/p95': `${median(vecOnly).toFixed(2)} / ${percentile(vecOnly, 95).toFixed(2)} ms`,
    },
    { ok: percentile(turn, 95) <= targets.turn, target: `adds <= ${targets.turn} ms p95 before dispatch` },
  );
  return okSearch && okRecall && okFilterReport && okTurn;
}

// ---------------------------------------------------------------------------------------------------
// 3. The backfill.

async function backfill(o: OpenedCore, llm: FakeLlm): Promise<boolean> {
  const r = rng(99);
  const texts = Array.from({ length: BACKFILL }, () => memoryText(r, pickKind(r)));
  // Baseline: the scripted embedder alone, the same texts in the same batches, one request at a time.
  const rawStart = performance.now();
  for (let i = 0; i < texts.length; i += EMBED_BATCH) {
    const res = await fetch(`${llm.url}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, input: texts.slice(i, i + EMBED_BATCH) }) });
    await res.json();
  }
  const rawRate = BACKFILL / ((performance.now() - rawStart) / 1000);

  const w = await seedWorkspace(o, 'backfill', llm, 4);
  await o.db.query(
    `insert into memories (tenant_id, user_id, kind, content, created_at) select $1, $2, 'fact', c, now() - (o * interval '1 second') from unnest($3::text[]) with ordinality as t(c, o)`,
    [w.tenantId, w.people[0].id, texts],
  );
  await o.db.query('analyze memories');
  const job = await o.core.jobs.create(w.ownerCtx, { kind: EMBED_MEMORIES_JOB, payload: { limit: BACKFILL } });
  const data: BackfillData = { tenantId: w.tenantId, jobId: job.id, modelKey: w.modelKey };
  const s = performance.now();
  await o.core.jobHandlers[EMBED_MEMORIES_JOB](systemCtx(silentLogger, { name: 'worker', channel: 'worker' }), data, { id: 'bench', name: EMBED_MEMORIES_JOB, retryCount: 0 });
  const jobS = (performance.now() - s) / 1000;
  const { rows } = await o.db.query<{ n: number }>(`select count(*)::int as n from memories where tenant_id = $1 and embedding_model = $2 and embedding_bits is not null`, [w.tenantId, w.modelKey]);
  const status = (await o.db.query<{ status: string }>(`select status from tenant_jobs where id = $1`, [job.id])).rows[0].status;
  const embedded = rows[0].n;
  return report(
    `memories: embed-memories backfill of ${BACKFILL.toLocaleString('en')} memories, ${DIMS} dims, scripted embedder (PostgreSQL, batches of ${EMBED_BATCH})`,
    {
      'baseline scripted embedder alone (mem/s)': rawRate.toFixed(0),
      'backfill (mem/s)': `${(embedded / jobS).toFixed(0)} (${embedded} in ${jobS.toFixed(1)} s, job ${status})`,
      'ratio to the embedder alone': `${((embedded / jobS / rawRate) * 100).toFixed(0)} %`,
    },
    { ok: embedded === BACKFILL && embedded / jobS >= 500, target: '>= 500 memories/s' },
  );
}

/**
 * Recall@10 on dense, topically clustered vectors (denseVector), ROWS memories of one tenant on
 * PostgreSQL, through the repo's statement as the service runs it, also under a ~5 % filter.
 */
async function denseRecall(o: OpenedCore, llm: FakeLlm): Promise<boolean> {
  const w = await seedWorkspace(o, 'dense', llm);
  const key = `bench/dense/${DIMS}`;
  const timings = await loadMemories(o, w, ROWS, 3, { key, of: denseVector, digits: 4 });
  const r = rng(11);
  const admins = w.people.filter((p) => p.role !== 'member');
  const members = w.people.filter((p) => p.role === 'member');
  const viewer = async (p: Person): Promise<Viewer> => {
    const m = (await o.core.rbac.resolvePermissions(w.tenantId, [p.role])).memory;
    return { tenantId: w.tenantId, userId: p.id, readOwn: m.read_own, readTeam: m.read_team, readOrg: m.read_org };
  };
  const queries: RecallQuery[] = [];
  for (let i = 0; i < RECALL_QUERIES; i++) {
    const t = pick(r, TOPIC_NAMES);
    const typed = i % 2 === 0;
    const text = typed ? queryText(r, t) : promptText(r, i);
    queries.push({ typed, values: denseVector(text, t), viewer: await viewer(i % 4 < 2 ? admins[i % admins.length] : members[i % members.length]) });
  }
  const rec = await recallOf(o, key, queries);
  // The ~5 % filter (an admin's skill-notes), the vector arm alone: the full limit, and the right ones?
  const adminViewer = await viewer(admins[1]);
  const filtered = await recallOf(
    o,
    key,
    Array.from({ length: 50 }, (_, i) => {
      const t = pick(r, TOPIC_NAMES);
      return { typed: i % 2 === 0, values: denseVector(queryText(r, t), t), viewer: adminViewer, kind: 'skill-note' as const };
    }),
  );
  const line = (x: { typed: number; prompt: number; t: number[] }) => `${x.typed.toFixed(4)} / ${x.prompt.toFixed(4)}, p50/p95 ${median(x.t).toFixed(2)} / ${percentile(x.t, 95).toFixed(2)} ms`;
  const ok = [rec, filtered].every((x) => x.typed >= 0.95 && x.prompt >= 0.95) && filtered.full === 50;
  return report(
    `memories: vector recall@10 on dense clustered vectors against exact ranking (PostgreSQL, ${ROWS.toLocaleString('en')} memories, ${RECALL_QUERIES} queries)`,
    {
      'load and vacuum (s)': timings.loadS.toFixed(1),
      'recall@10 typed / prompts (as the service searches)': line(rec),
      'baseline: exact ranking of every visible vector p50 / p95 (ms)': `${median(rec.referenceT).toFixed(2)} / ${percentile(rec.referenceT, 95).toFixed(2)}`,
      'admin kind=skill-note: recall typed / prompts': `${line(filtered)}, ${filtered.full}/50 full`,
    },
    { ok, target: 'recall@10 >= 0.95 (both shapes, also filtered to ~5 %), full limits' },
  );
}

// ---------------------------------------------------------------------------------------------------

export async function memoriesBench(): Promise<boolean> {
  process.stdout.write(`\n# memories bench — ${new Date().toISOString()} — load average ${loadAvg()}\n`);
  const llm = await startFakeLlm();
  let ok = true;
  try {
    if (PARTS.includes('pg') || PARTS.includes('backfill') || PARTS.includes('dense')) {
      const db = await scratchDatabase('agentws_bench_memories');
      const dir = mkdtempSync(join(tmpdir(), 'aws-bm-'));
      const o = await openOn(db.url, dir);
      try {
        if (PARTS.includes('pg')) {
          const w = await seedWorkspace(o, 'big', llm);
          const timings = await loadMemories(o, w, ROWS, 1);
          ok = (await measure('PostgreSQL', o, w, ROWS, { search: 20, turn: 20 }, timings)) && ok;
        }
        if (PARTS.includes('backfill')) ok = (await backfill(o, llm)) && ok;
        if (PARTS.includes('dense')) ok = (await denseRecall(o, llm)) && ok;
      } finally {
        await o.close();
        if (process.env.BENCH_MEMORIES_KEEP) process.stderr.write(`kept ${db.url}\n`);
        else await db.drop();
        rmSync(dir, { recursive: true, force: true });
      }
    }
    if (PARTS.includes('embedded')) {
      const dir = mkdtempSync(join(tmpdir(), 'aws-bm-'));
      const o = await openOn(null, join(dir, 'data'));
      try {
        const w = await seedWorkspace(o, 'small', llm);
        const timings = await loadMemories(o, w, EMBEDDED_ROWS, 2);
        ok = (await measure('embedded database', o, w, EMBEDDED_ROWS, { search: 100, turn: 20 }, timings)) && ok;
      } finally {
        await o.close();
        rmSync(dir, { recursive: true, force: true });
      }
    }
  } finally {
    await llm.close();
  }
  process.stdout.write(`\n# memories bench done — ${new Date().toISOString()} — load average ${loadAvg()}\n`);
  return ok;
}
