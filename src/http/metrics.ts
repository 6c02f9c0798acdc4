import type { ServerResponse } from 'node:http';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction, onRequestHookHandler } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Config } from '../config/config.schema.js';
import type { Core } from '../core/create-core.js';
import { UnauthenticatedError } from '../kernel/errors.js';
import { QUEUE_STATES } from '../core/jobs/job-queue.js';
import { safeEqual } from '../lib/secrets.js';
import type { App } from './app-type.js';
import { errorResponses } from './schemas.js';

/** The route label of a request no route matched (404s, malformed paths): keeps the label set bounded. */
const UNMATCHED = 'unmatched';
const EVENT_STREAM = 'text/event-stream';
const BEARER = /^bearer /i;

/**
 * GET /metrics in the Prometheus text format, on a registry of this app's own (never prom-client's
 * global one): HTTP requests by route pattern and status, open event streams, and what the core reads
 * at scrape time (jobs, runtimes, model usage, pairing; see MetricsService). Call before any route is
 * registered: the hooks see only the routes that come after them.
 */
export function registerMetrics(app: App, core: Core, config: Config): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const reg = { registers: [registry] };

  const durations = new Histogram({
    ...reg,
    name: 'agentws_http_request_duration_seconds',
    help: 'Time from receiving a request to the end of its answer, by method, route pattern and status',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  });
  // The histogram's counts, as the counter alerting rules expect: taken from it at scrape time, so a
  // request pays for one observation (prom-client hashes the labels on each: ~0.7 us) rather than two.
  new Counter({
    ...reg,
    name: 'agentws_http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status (event streams: see agentws_sse_streams_open)',
    labelNames: ['method', 'route', 'status'],
    async collect() {
      const counts = (await durations.get()).values.filter((v) => v.metricName === 'agentws_http_request_duration_seconds_count');
      this.reset();
      for (const v of counts) this.inc(v.labels, v.value);
    },
  });
  const sseStreams = new Gauge({ ...reg, name: 'agentws_sse_streams_open', help: 'Event streams (SSE) open on this process, by route pattern', labelNames: ['route'] });
  const databaseUp = new Gauge({ ...reg, name: 'agentws_database_up', help: '1 when the database answered this scrape\'s reads; 0 leaves out the series read from it (jobs, pending pairing codes)' });
  const jobs = new Gauge({ ...reg, name: 'agentws_jobs', help: 'Jobs in the job queue (all processes), by queue and state: created (waiting), retry (waiting for a retry), active (running), failed (for good, kept 7 days)', labelNames: ['queue', 'state'] });
  const jobsWaiting = new Gauge({ ...reg, name: 'agentws_jobs_oldest_waiting_seconds', help: 'Age of the oldest job ready to run that no worker has taken, by queue (0: none waiting)', labelNames: ['queue'] });
  const runtimes = new Gauge({ ...reg, name: 'agentws_runtimes', help: 'Agent runtimes this process hosts, by state (starting; ready: awake; frozen: idle, using no CPU until its next request; paged_out: frozen, its memory in swap)', labelNames: ['state'] });
  const runtimesMemory = new Gauge({ ...reg, name: 'agentws_runtimes_memory_bytes', help: 'Private resident memory of the processes of the runtimes this process hosts (read every 30 s)' });
  const hostMemory = new Gauge({ ...reg, name: 'agentws_host_memory_bytes', help: 'The host\'s memory as the runtime pool weighs it (its cgroup limit inside a container), by kind: total, available', labelNames: ['kind'] });
  const runtimesBusy = new Gauge({ ...reg, name: 'agentws_runtimes_busy', help: 'Runtimes of this process with a turn running' });
  const runtimesMax = new Gauge({ ...reg, name: 'agentws_runtimes_max', help: 'Most runtimes this process holds at once (AGENTWS_RUNTIME_MAX; by default from the host\'s memory)' });
  const agentsAvailable = new Gauge({ ...reg, name: 'agentws_agents_available', help: '1 when this process hosts agent runtimes and can start them; 0 when it hosts none or cannot start one (no sandbox; see /readyz)' });
  // The runtimes' limits: which hold here, and each person against theirs (every host, from the database).
  const limitHeld = new Gauge({ ...reg, name: 'agentws_runtime_limit_held', help: '1 when the limit holds the runtimes this process hosts, by limit (memory, processes, cpu, disk) and mechanism (cgroup2, cgroup1, measured); 0 with mechanism "none" when it does not (see /readyz for why)', labelNames: ['limit', 'mechanism'] });
  const dataDisk = new Gauge({ ...reg, name: 'agentws_data_disk_bytes', help: 'The data directory\'s filesystem (workspaces, runtime homes, the embedded database) on this process\'s host, by kind: total, free', labelNames: ['kind'] });
  const personLabels = ['tenant', 'user', 'host'];
  const personMemory = new Gauge({ ...reg, name: 'agentws_runtime_memory_bytes', help: 'Memory of a person\'s running runtime (its cgroup, less what the kernel can drop at once), every host, as last reported', labelNames: personLabels });
  const personMemoryMax = new Gauge({ ...reg, name: 'agentws_runtime_memory_limit_bytes', help: 'A person\'s runtime\'s memory limit', labelNames: personLabels });
  const personPids = new Gauge({ ...reg, name: 'agentws_runtime_processes', help: 'Processes and threads of a person\'s running runtime', labelNames: personLabels });
  const personPidsMax = new Gauge({ ...reg, name: 'agentws_runtime_processes_limit', help: 'A person\'s runtime\'s process limit', labelNames: personLabels });
  const personDisk = new Gauge({ ...reg, name: 'agentws_workspace_disk_bytes', help: 'What a person\'s files take (workspace, runtime home and run directory), as last measured', labelNames: personLabels });
  const personQuota = new Gauge({ ...reg, name: 'agentws_workspace_quota_bytes', help: 'A person\'s workspace quota', labelNames: personLabels });
  const personOom = new Gauge({ ...reg, name: 'agentws_runtime_oom_kills', help: 'Processes of a person\'s runtime the kernel ended at its memory limit since it started', labelNames: personLabels });
  const personForks = new Gauge({ ...reg, name: 'agentws_runtime_forks_refused', help: 'Forks of a person\'s runtime refused at its process limit since it started', labelNames: personLabels });
  const modelCalls = new Counter({ ...reg, name: 'agentws_model_calls_total', help: 'Model calls recorded (usage records, from every process) since this process started, by provider, model and channel', labelNames: ['provider', 'model', 'channel'] });
  const modelTokens = new Counter({ ...reg, name: 'agentws_model_tokens_total', help: 'Tokens of the model calls recorded since this process started, by provider, model, channel and type', labelNames: ['provider', 'model', 'channel', 'type'] });
  const modelCost = new Counter({ ...reg, name: 'agentws_model_cost_usd_total', help: 'Cost in USD of the model calls recorded since this process started, by provider, model and channel', labelNames: ['provider', 'model', 'channel'] });
  const approvals = new Counter({ ...reg, name: 'agentws_pairing_approvals_total', help: 'Pairing codes approved (by any process) since this process started, by platform', labelNames: ['platform'] });
  const pendingCodes = new Gauge({ ...reg, name: 'agentws_pairing_codes_pending', help: 'Pairing codes waiting for an operator\'s approval' });

  // HTTP requests: one child per method, route and status, kept (the set is bounded by the routes).
  const children = new Map<string, Histogram.Internal<string>>();
  /** Event-stream routes (their schema produces text/event-stream) and the streams open on them. */
  const streamRoutes = new Set<string>();
  const openStreams = new Map<ServerResponse, string>();

  app.addHook('onRoute', (route) => {
    const produces = (route.schema as { produces?: unknown } | undefined)?.produces;
    if (!Array.isArray(produces) || !produces.includes(EVENT_STREAM)) return;
    const url = route.url;
    streamRoutes.add(url);
    // The response is watched from its first hook; it counts as an open stream once its handler has
    // sent the 200 head (a refused one ends with 401/404 and is gone before any scrape sees it so).
    const track: onRequestHookHandler = (_req, reply, done) => {
      const res = reply.raw;
      openStreams.set(res, url);
      res.once('close', () => openStreams.delete(res));
      done();
    };
    const existing = route.onRequest ? (Array.isArray(route.onRequest) ? route.onRequest : [route.onRequest]) : [];
    route.onRequest = [...existing, track];
  });

  app.addHook('onResponse', (req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const route = req.routeOptions.url ?? UNMATCHED;
    const status = reply.statusCode;
    // A stream's 200 lasts as long as its client stays: the gauge above measures it, not the histogram.
    if (status === 200 && streamRoutes.has(route)) return done();
    const key = `${req.method} ${status} ${route}`;
    let child = children.get(key);
    if (!child) children.set(key, (child = durations.labels({ method: req.method, route, status: String(status) })));
    child.observe(reply.elapsedTime / 1000);
    done();
  });

  /** Sets every gauge and counter read at scrape time from the core's snapshot. */
  async function refresh(): Promise<void> {
    const s = await core.metrics.snapshot();
    databaseUp.set(s.databaseUp ? 1 : 0);

    sseStreams.reset();
    for (const url of streamRoutes) sseStreams.set({ route: url }, 0);
    for (const [res, url] of openStreams) if (res.headersSent && res.statusCode === 200 && !res.writableEnded) sseStreams.inc({ route: url });

    jobs.reset();
    jobsWaiting.reset();
    if (s.jobs) {
      const queues = new Set([...Object.keys(core.jobHandlers), ...s.jobs.counts.map((c) => c.queue)]);
      for (const queue of queues) {
        jobsWaiting.set({ queue }, 0);
        // Every state of every known queue, 0 included: alert expressions always find their series.
        for (const state of QUEUE_STATES) jobs.set({ queue, state }, 0);
      }
      for (const c of s.jobs.counts) jobs.set({ queue: c.queue, state: c.state }, c.count);
      for (const w of s.jobs.oldestWaiting) jobsWaiting.set({ queue: w.queue }, w.seconds);
    }

    runtimes.set({ state: 'starting' }, s.runtimes.starting);
    runtimes.set({ state: 'ready' }, s.runtimes.ready);
    runtimes.set({ state: 'frozen' }, s.runtimes.frozen);
    runtimes.set({ state: 'paged_out' }, s.runtimes.pagedOut);
    runtimesMemory.set(s.runtimes.memoryBytes);
    hostMemory.set({ kind: 'total' }, s.runtimes.hostMemoryTotalBytes);
    hostMemory.set({ kind: 'available' }, s.runtimes.hostMemoryAvailableBytes);
    runtimesBusy.set(s.runtimes.busy);
    runtimesMax.set(s.runtimes.max);
    agentsAvailable.set(s.runtimes.available ? 1 : 0);

    limitHeld.reset();
    const m = s.limits.mechanisms;
    if (m) {
      for (const [limit, mechanism] of [['memory', m.memory], ['processes', m.processes], ['cpu', m.cpu], ['disk', m.disk]] as const) limitHeld.set({ limit, mechanism: mechanism ?? 'none' }, mechanism ? 1 : 0);
    }
    dataDisk.reset();
    if (s.limits.dataDisk) {
      dataDisk.set({ kind: 'total' }, s.limits.dataDisk.totalBytes);
      dataDisk.set({ kind: 'free' }, s.limits.dataDisk.freeBytes);
    }
    for (const g of [personMemory, personMemoryMax, personPids, personPidsMax, personDisk, personQuota, personOom, personForks]) g.reset();
    for (const p of s.limits.people) {
      const labels = { tenant: p.tenantId, user: p.userId, host: p.host };
      if (p.running && p.memoryBytes !== null) personMemory.set(labels, p.memoryBytes);
      if (p.running && p.pids !== null) personPids.set(labels, p.pids);
      if (p.memoryMaxBytes !== null) personMemoryMax.set(labels, p.memoryMaxBytes);
      if (p.pidsMax !== null) personPidsMax.set(labels, p.pidsMax);
      if (p.diskBytes !== null) personDisk.set(labels, p.diskBytes);
      if (p.diskQuotaBytes !== null) personQuota.set(labels, p.diskQuotaBytes);
      personOom.set(labels, p.oomKills);
      personForks.set(labels, p.pidsRefused);
    }

    // The core keeps the totals (counted once each, see tail.ts); a counter is set by reset and add.
    for (const m of [modelCalls, modelTokens, modelCost, approvals]) m.reset();
    for (const u of s.modelUsage) {
      const labels = { provider: u.provider, model: u.model, channel: u.channel };
      modelCalls.inc(labels, u.calls);
      modelCost.inc(labels, u.costUsd);
      for (const [type, n] of [['input', u.tokens.input], ['output', u.tokens.output], ['reasoning', u.tokens.reasoning], ['cache_read', u.tokens.cacheRead], ['cache_write', u.tokens.cacheWrite]] as const) {
        modelTokens.inc({ ...labels, type }, n);
      }
    }
    for (const a of s.pairingApprovals) approvals.inc({ platform: a.platform }, a.count);
    pendingCodes.reset();
    if (s.pendingPairingCodes !== null) pendingCodes.set(s.pendingPairingCodes);
  }

  // Outside /v1 (a scraper's fixed path) and outside the API's authentication: only the service's own
  // credentials open it, never a user's token, since the numbers span every tenant.
  const credentials = [config.secrets.apiKey, config.secrets.metricsToken].filter((c): c is string => Boolean(c));
  const hint = 'Send Authorization: Bearer <AGENTWS_METRICS_TOKEN or AGENTWS_API_KEY>.';
  const authorize: onRequestHookHandler = (req, _reply, done) => {
    if (credentials.length === 0) {
      return done(new UnauthenticatedError('no credential for /metrics is configured', { hint: 'Set AGENTWS_METRICS_TOKEN (or AGENTWS_API_KEY) and send it as Authorization: Bearer <token>.' }));
    }
    const header = req.headers.authorization;
    const bearer = header !== undefined && BEARER.test(header) ? header.slice(7).trim() : '';
    if (!bearer) return done(new UnauthenticatedError('authentication required', { hint }));
    // Every credential is compared (no early exit) in constant time: the answer's timing tells nothing.
    let ok = false;
    for (const c of credentials) ok = safeEqual(bearer, c) || ok;
    done(ok ? undefined : new UnauthenticatedError('not a credential for /metrics', { hint }));
  };

  app.get(
    '/metrics',
    {
      onRequest: authorize,
      schema: {
        tags: ['metrics'],
        summary: 'Prometheus metrics (text exposition format 0.0.4)',
        description:
          'Bearer AGENTWS_METRICS_TOKEN or the service API key (AGENTWS_API_KEY); user tokens are refused. HTTP and stream series count this process; jobs, model usage and pairing are read from the database, the same on every process.',
        produces: [registry.contentType],
        response: { 200: Type.String({ description: 'Prometheus text format' }), ...errorResponses(401) },
      },
    },
    async (_req, reply) => {
      await refresh();
      const text = await registry.metrics();
      return reply.type(registry.contentType).send(text);
    },
  );
  return registry;
}
