import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import http2, { type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import https from 'node:https';
import { dirname, join, normalize } from 'node:path';
import type { Socket } from 'node:net';
import { controlPlaneForbidden, createEgressDecider, type EgressDecider } from '../core/runtime/host/egress-decider.js';
import { parsePrivateAllow, type EgressRules } from '../core/runtime/host/egress-policy.js';
import { createEgressProxy } from '../core/runtime/host/egress-proxy.js';
import { AppError } from '../kernel/errors.js';
import type { Logger } from '../kernel/logger.js';
import { RUNNER_HEADERS, RUNNER_PATHS, RUNNER_PROTOCOL, proofHolds, type RunnerInfo } from '../core/runtime/host/runner-protocol.js';
import type { RunnerNotice } from '../core/runtime/host/runner-links.js';
import type { RuntimeHandle } from '../core/runtime/host/runtime-transport.js';
import { createRuntimeLauncher } from '../core/runtime/host/runtime-launcher.js';
import { MANAGED_CONFIG_ROUTE, managedConfigDir, runtimeRoot, writeManagedConfig } from '../core/runtime/host/managed-config.js';
import { createRuntimeHost, tenantSharedDir, type HostRecords, type PoolStatus, type RuntimeIdentity, type RuntimeOwner } from '../core/runtime/host/runtime-host.js';
import { randomSecret } from '../lib/secrets.js';
import { workspacePath } from '../lib/data-paths.js';

/**
 * A runner host (`aws runner`): hosts the sandboxed runtimes of the users the control plane places on
 * it, exactly as `aws serve` hosts them on one machine (the same runtime host, sandbox, freezer and egress
 * proxy), and holds no secret of the appliance: no database, no encryption key, no provider key. It
 * dials the control plane (runner-protocol.ts) and then answers it over that one connection; what its
 * runtimes need from the control plane (model calls and memory tools through the gateway host, egress
 * rules, the tenant's shared files) it asks for with its runner token, naming the user and the lease.
 */
export interface RunnerOptions {
  controlUrl: string;
  token: string;
  info: RunnerInfo;
  dataDir: string;
  sandbox: boolean;
  nice: number;
  idleMs: number;
  freezeAfterMs: number;
  /** What bounds each runtime (memory, processes: null = off) and its /tmp's size; the quota comes with each start. */
  limits?: { memoryMaxBytes: number | null; pidsMax: number | null; tmpBytes: number };
  log: Logger;
}

const RULES_CACHE_MS = 2000;
/**
 * How long a runner keeps its runtimes without hearing from the control plane (it syncs every 5 s):
 * under the control plane's heartbeat timeout (30 s), so they are stopped here before anyone else
 * can be given their users.
 */
export const LEASE_MS = 20_000;
const MAX_BACKOFF_MS = 30_000;
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'host', 'proxy-connection', 'proxy-authorization', 'te', 'trailer']);

/** The lease the control plane gave this runner for a user: requests for the user carry its fence. */
interface Lease {
  tenantId: string;
  fence: number;
}

export function createRunnerAgent(o: RunnerOptions) {
  const { log } = o;
  const control = new URL(o.controlUrl);
  const client = control.protocol === 'https:' ? https : http;
  const controlAgent = new client.Agent({ keepAlive: true, maxSockets: 256 });
  const leases = new Map<string, Lease>();
  const watchers = new Set<Http2ServerResponse>();
  let stopping = false;
  let channel: Socket | null = null;
  let connectedOnce = false;
  let lastStatus: PoolStatus | null = null;
  /** When the control plane last confirmed this runner's leases (see the self-fence in start). */
  let lastSync = Date.now();
  let fenceTimer: NodeJS.Timeout | null = null;
  /** Runtimes being configured by the control plane (through this channel) before the host hands them out. */
  const configuring = new Map<string, RuntimeHandle>();
  /** Each user's workspace quota as the control plane last sent it (with a start: their tenant's setting). */
  const quotas = new Map<string, number | null>();

  const tokenHeaders = (owner?: RuntimeOwner): Record<string, string> => {
    const h: Record<string, string> = { [RUNNER_HEADERS.token]: o.token, [RUNNER_HEADERS.runner]: o.info.name };
    if (owner) {
      h[RUNNER_HEADERS.tenant] = owner.tenantId;
      h[RUNNER_HEADERS.user] = owner.userId;
      h[RUNNER_HEADERS.fence] = String(leases.get(owner.userId)?.fence ?? 0);
    }
    return h;
  };

  /** One JSON request to the control plane. */
  function callControl<T>(method: string, path: string, body: unknown, owner?: RuntimeOwner): Promise<T> {
    return new Promise((resolve, reject) => {
      const data = body === undefined ? null : Buffer.from(JSON.stringify(body));
      const req = client.request(new URL(path, control), {
        method,
        agent: controlAgent,
        timeout: 60_000,
        headers: { ...tokenHeaders(owner), ...(data ? { 'content-type': 'application/json', 'content-length': String(data.length) } : {}) },
      });
      req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
      req.on('error', reject);
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: any = null;
          try {
            json = text ? JSON.parse(text) : null;
          } catch {
            json = { message: text.slice(0, 200) };
          }
          if ((res.statusCode ?? 500) >= 300) reject(new Error(`the control plane answered ${res.statusCode}: ${json?.message ?? ''}`));
          else resolve(json as T);
        });
      });
      req.end(data ?? undefined);
    });
  }

  // What the runner's egress proxy decides by: the tenant's lists and the operator's settings, from the
  // control plane; and never the control plane itself (the agent reaches it only through its gateway).
  const rulesCache = new Map<string, { at: number; value: Promise<{ rules: EgressRules; decider: EgressDecider }> }>();
  const deciders = new Map<string, EgressDecider>();
  const forbidden = controlPlaneForbidden(o.controlUrl);
  function rulesOf(owner: RuntimeOwner) {
    const { tenantId } = owner;
    const hit = rulesCache.get(tenantId);
    if (hit && Date.now() - hit.at < RULES_CACHE_MS) return hit.value;
    const value = callControl<{ rules: EgressRules; privateAllow: string; ports: number[] }>('GET', `${RUNNER_PATHS.egress}?tenantId=${encodeURIComponent(tenantId)}`, undefined, owner).then((r) => {
      const key = `${r.privateAllow}|${r.ports.join(',')}`;
      let decider = deciders.get(key);
      if (!decider) deciders.set(key, (decider = createEgressDecider({ privateAllow: parsePrivateAllow(r.privateAllow).entries, ports: r.ports, forbidden })));
      return { rules: r.rules, decider };
    });
    rulesCache.set(tenantId, { at: Date.now(), value });
    value.catch(() => rulesCache.delete(tenantId));
    return value;
  }

  /** The runtime's model calls and memory tools: passed to the control plane's gateway as they stream. */
  function relayGateway(identity: RuntimeIdentity, req: IncomingMessage, res: ServerResponse, url: URL): void {
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !HOP.has(k)) headers[k] = v;
    Object.assign(headers, tokenHeaders(identity));
    const up = client.request(new URL(`${RUNNER_PATHS.gateway}${url.pathname}${url.search}`, control), { method: req.method, agent: controlAgent, headers });
    up.on('response', (r) => {
      const back: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(r.headers)) if (v !== undefined && !HOP.has(k)) back[k] = v;
      res.writeHead(r.statusCode ?? 502, back);
      res.flushHeaders();
      r.pipe(res);
    });
    up.on('error', (err) => {
      if (res.headersSent) return void res.destroy();
      res.writeHead(502, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: `agentws: the control plane cannot be reached: ${err.message}` } }));
    });
    res.on('close', () => up.destroy());
    req.pipe(up);
  }

  const proxy = createEgressProxy<RuntimeIdentity>({
    decide: async (identity, host, port) => {
      const { rules, decider } = await rulesOf(identity);
      return decider.decide(host, port, rules);
    },
    gateway: relayGateway,
    refused: (identity, target) => void callControl('POST', RUNNER_PATHS.refused, target, identity).catch(() => {}),
    log,
  });

  const notify = (notice: RunnerNotice) => {
    const line = `${JSON.stringify(notice)}\n`;
    for (const w of watchers) w.write(line);
  };

  // The host records nothing here: the control plane's database is written by the control plane, when
  // this runner tells it a runtime started (configure below) or stopped.
  const records: HostRecords = {
    started: async () => {},
    stopped: async (owner, pid, o) => {
      notify({ type: 'stopped', tenantId: owner.tenantId, userId: owner.userId, pid });
      // Why, and whether it was idle: a stop of an idle runtime loses no turn (turn-runner.ts runtimeLost).
      await callControl('POST', RUNNER_PATHS.stopped, { pid, why: o?.why ?? null, idle: o?.idle ?? false }, owner).catch((err) => log.warn({ err: (err as Error).message }, 'could not tell the control plane a runtime stopped'));
    },
    hostStarting: async () => {},
    report: async (_host, s) => {
      lastStatus = s;
    },
    hostStopped: async () => {},
    // A limit met: the control plane tells the person (on the stream of a turn they have running).
    limit: async (owner, notice) => {
      await callControl('POST', RUNNER_PATHS.limit, notice, owner).catch((err) => log.warn({ err: (err as Error).message }, 'could not tell the control plane of a runtime\'s limit'));
    },
  };

  const runtimes = createRuntimeHost({
    records,
    log: log.child({ part: 'runtime' }),
    dataDir: o.dataDir,
    max: o.info.capacity,
    idleMs: o.idleMs,
    freezeAfterMs: o.freezeAfterMs,
    sandboxed: o.sandbox,
    // Gateway credentials are the control plane's to derive and check: nothing here depends on this key.
    credentialKey: randomSecret(32),
    launcher: () => createRuntimeLauncher({ dataDir: o.dataDir, sandbox: o.sandbox, nice: o.nice, tmpBytes: o.limits?.tmpBytes, log: log.child({ part: 'runtime' }) }),
    limits: o.limits,
    quotaOf: (owner) => quotas.get(owner.userId) ?? null,
    listen: (identity, at) => proxy.listen(identity, at),
    // The control plane records the runtime and writes its configuration (through this channel) before
    // the runtime is handed out.
    configure: async (owner, handle, pid) => {
      configuring.set(owner.userId, handle);
      try {
        await callControl('POST', RUNNER_PATHS.started, { pid, authorization: handle.endpoint.authorization, directory: handle.directory }, owner);
      } finally {
        configuring.delete(owner.userId);
      }
    },
  });
  runtimes.onChange((owner, handle) => {
    if (!handle) return;
    const pid = runtimes.live().find((l) => l.userId === owner.userId)?.pid ?? 0;
    notify({ type: 'ready', tenantId: owner.tenantId, userId: owner.userId, pid, authorization: handle.endpoint.authorization, directory: handle.directory });
  });

  /** The tenant's shared files (promoted skills) as the control plane sent them. */
  function writeShared(tenantId: string, files: Array<{ path: string; content: string }>) {
    const root = tenantSharedDir(o.dataDir, tenantId);
    for (const f of files) {
      const rel = normalize(f.path);
      if (rel.startsWith('..') || rel.startsWith('/')) continue;
      const to = join(root, rel);
      const content = Buffer.from(f.content, 'base64');
      try {
        if (readFileSync(to).equals(content)) continue;
      } catch {
        // new file
      }
      mkdirSync(dirname(to), { recursive: true, mode: 0o755 });
      writeFileSync(to, content, { mode: 0o644 });
    }
  }

  const readJson = async (req: Http2ServerRequest): Promise<any> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {};
  };
  const json = (res: Http2ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const fail = (res: Http2ServerResponse, err: unknown) => {
    const e = err as AppError;
    const status = e instanceof AppError ? e.status : 500;
    json(res, status, { error: e.code ?? 'runner_error', message: e.message, ...(e instanceof AppError ? { hint: e.hint, details: e.details } : {}) });
  };

  /** The runtime API of a user placed here, passed through as it streams. */
  async function passToRuntime(userId: string, path: string, req: Http2ServerRequest, res: Http2ServerResponse) {
    const lease = leases.get(userId);
    const handle: RuntimeHandle | null = lease ? (configuring.get(userId) ?? (await runtimes.running({ tenantId: lease.tenantId, userId }))) : null;
    if (!handle?.endpoint.socketPath && !handle?.endpoint.url) {
      req.resume();
      return json(res, 503, { error: 'runtime_unavailable', message: 'the runtime is not running on this runner' });
    }
    const ep = handle.endpoint;
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined && !k.startsWith(':') && !HOP.has(k)) headers[k] = v as string | string[];
    headers.authorization = ep.authorization;
    const target = ep.socketPath ? { socketPath: ep.socketPath, path } : { host: new URL(ep.url!).hostname, port: new URL(ep.url!).port, path };
    const up = http.request({ ...target, method: req.method, headers, agent: false });
    up.on('response', (r) => {
      const back: Record<string, string | string[]> = {};
      for (const [k, v] of Object.entries(r.headers)) if (v !== undefined && !HOP.has(k)) back[k] = v;
      res.writeHead(r.statusCode ?? 502, back);
      r.pipe(res);
    });
    up.on('error', (err) => (res.headersSent ? res.stream.close() : json(res, 502, { error: 'runtime_unavailable', message: err.message })));
    res.on('close', () => up.destroy());
    req.pipe(up);
  }

  /**
   * The managed configuration of a user's runtime placed here, as the control plane wrote it (the host
   * writes it: inside, it is read-only; managed-config.ts).
   */
  async function writeConfig(userId: string, req: Http2ServerRequest, res: Http2ServerResponse) {
    const body = await readJson(req);
    if (!leases.has(userId) || !/^[A-Za-z0-9-]{1,64}$/.test(userId)) return json(res, 404, { error: 'not_found', message: 'no such user on this runner' });
    if (!body || typeof body !== 'object' || Array.isArray(body)) return json(res, 400, { error: 'validation_failed', message: 'a JSON object' });
    return json(res, 200, { changed: writeManagedConfig(managedConfigDir(runtimeRoot(o.dataDir, userId)), body) });
  }

  /**
   * A user's files as a tar stream (a drain moves them to another runner): their workspace and their
   * runtime's home (its sessions database, so transcripts move too); never the sockets or scratch files.
   * Only for a user whose runtime is stopped here (the control plane stops it first).
   */
  function userPaths(tenantId: string, userId: string): string[] | null {
    const id = /^[A-Za-z0-9-]{1,64}$/;
    if (!id.test(tenantId) || !id.test(userId)) return null;
    return [workspacePath({ tenantId, userId }), join('runtimes', userId, 'home')];
  }

  function exportUser(tenantId: string, userId: string, res: Http2ServerResponse) {
    const paths = userPaths(tenantId, userId);
    if (!paths) return json(res, 400, { error: 'validation_failed', message: 'tenantId and userId' });
    if (runtimes.live().some((l) => l.userId === userId)) return json(res, 409, { error: 'runtime_running', message: 'stop the runtime before moving its files' });
    const present = paths.filter((p) => existsSync(join(o.dataDir, p)));
    res.writeHead(200, { 'content-type': 'application/x-tar' });
    if (!present.length) {
      // An empty archive: two zero blocks.
      res.end(Buffer.alloc(1024));
      return;
    }
    const tar = spawn('tar', ['-C', o.dataDir, '-cf', '-', '--', ...present], { stdio: ['ignore', 'pipe', 'pipe'] });
    tar.stdout.pipe(res);
    tar.stderr.on('data', (c) => log.warn({ userId, tar: String(c).trim() }, 'export'));
    res.on('close', () => tar.kill());
  }

  async function importUser(tenantId: string, userId: string, req: Http2ServerRequest, res: Http2ServerResponse) {
    const paths = userPaths(tenantId, userId);
    if (!paths) return json(res, 400, { error: 'validation_failed', message: 'tenantId and userId' });
    if (runtimes.live().some((l) => l.userId === userId)) {
      req.resume();
      return json(res, 409, { error: 'runtime_running', message: 'the user\'s runtime runs here: not replacing its files' });
    }
    for (const p of paths) rmSync(join(o.dataDir, p), { recursive: true, force: true });
    mkdirSync(o.dataDir, { recursive: true, mode: 0o700 });
    // Only members under the user's two directories are extracted (the archive's contents are the
    // agent's files); owners are not taken from the archive.
    const tar = spawn('tar', ['-C', o.dataDir, '-xf', '-', '--no-same-owner', '--no-overwrite-dir', '--wildcards', ...paths.map((p) => `${p}`), ...paths.map((p) => `${p}/*`)], { stdio: ['pipe', 'ignore', 'pipe'] });
    let stderr = '';
    tar.stderr.on('data', (c) => (stderr += c));
    req.pipe(tar.stdin);
    const code = await new Promise<number | null>((r) => tar.once('close', r));
    // tar exits 2 when a listed member is absent (an empty workspace): what was there is extracted.
    if (code !== 0 && !/Not found in archive/.test(stderr)) return json(res, 500, { error: 'import_failed', message: stderr.trim().slice(-300) });
    return json(res, 200, { imported: true });
  }

  async function route(req: Http2ServerRequest, res: Http2ServerResponse): Promise<void> {
    const url = new URL(req.url, 'http://runner');
    const p = url.pathname;
    try {
      if (p.startsWith('/rt/')) {
        const rest = p.slice(4);
        const slash = rest.indexOf('/');
        const userId = decodeURIComponent(slash < 0 ? rest : rest.slice(0, slash));
        if (slash >= 0 && rest.slice(slash) === MANAGED_CONFIG_ROUTE && req.method === 'PUT') return await writeConfig(userId, req, res);
        runtimes.touch(userId);
        return await passToRuntime(userId, `${slash < 0 ? '/' : rest.slice(slash)}${url.search}`, req, res);
      }
      if (p === '/watch' && req.method === 'GET') {
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        watchers.add(res);
        res.on('close', () => watchers.delete(res));
        // A control-plane process that takes the channel learns what already runs.
        for (const l of runtimes.live()) {
          const h = l.pid ? await runtimes.running(l) : null;
          if (h && l.pid) res.write(`${JSON.stringify({ type: 'ready', tenantId: l.tenantId, userId: l.userId, pid: l.pid, authorization: h.endpoint.authorization, directory: h.directory })}\n`);
        }
        return;
      }
      if (p === '/export' && req.method === 'GET') return exportUser(url.searchParams.get('tenantId') ?? '', url.searchParams.get('userId') ?? '', res);
      if (p === '/import' && req.method === 'POST') return await importUser(url.searchParams.get('tenantId') ?? '', url.searchParams.get('userId') ?? '', req, res);
      if (req.method !== 'POST') return json(res, 404, { error: 'not_found', message: `${req.method} ${p}` });
      const body = await readJson(req);
      switch (p) {
        case '/acquire': {
          const owner = { tenantId: String(body.tenantId), userId: String(body.userId) };
          leases.set(owner.userId, { tenantId: owner.tenantId, fence: Number(body.fence) });
          const quota = Number(body.diskQuotaBytes);
          quotas.set(owner.userId, Number.isFinite(quota) && quota > 0 ? quota : null);
          if (Array.isArray(body.files)) writeShared(owner.tenantId, body.files);
          const handle = await runtimes.acquire(owner);
          const pid = runtimes.live().find((l) => l.userId === owner.userId)?.pid ?? 0;
          return json(res, 200, { pid, authorization: handle.endpoint.authorization, directory: handle.directory });
        }
        case '/stop':
          await runtimes.stopUser(String(body.userId));
          leases.delete(String(body.userId));
          return json(res, 200, { stopped: true });
        case '/running':
          runtimes.setRunning(String(body.userId), String(body.sessionId), Boolean(body.running));
          return json(res, 200, {});
        case '/shared':
          writeShared(String(body.tenantId), Array.isArray(body.files) ? body.files : []);
          return json(res, 200, {});
        case '/sync': {
          // The leases the control plane holds for this runner: a runtime of a user no longer placed here
          // (or placed again under a newer fence) is stopped: it must not serve a user it does not hold.
          const held = new Map<string, number>((body.placements as Array<{ userId: string; fence: number }>).map((x) => [x.userId, Number(x.fence)]));
          for (const l of runtimes.live()) {
            const fence = held.get(l.userId);
            const mine = leases.get(l.userId);
            if (fence === undefined || (mine && mine.fence !== fence)) {
              log.warn({ userId: l.userId }, 'stopping a runtime whose user is no longer placed on this runner');
              leases.delete(l.userId);
              void runtimes.stopUser(l.userId);
            }
          }
          for (const [userId, fence] of held) {
            const l = leases.get(userId);
            if (l) l.fence = fence;
          }
          lastSync = Date.now();
          const s = runtimes.status();
          lastStatus = s;
          const users = runtimes.live().map((l) => ({ userId: l.userId, state: l.state, running: l.running, idleMs: l.idleMs }));
          // Each user's figures against their limits, and which limits hold here: the control plane keeps
          // them for status (for users it has placed here only).
          const usage = s.usage.map(({ tenantId: _t, ...u }) => u);
          return json(res, 200, { capacity: s.capacity, resident: s.resident, busy: s.busy, frozen: s.frozen, starting: s.starting, runtimesMemoryBytes: s.runtimesMemoryBytes, memory: s.memory, users, usage, limits: { ...s.limits, freezer: s.freezer, freezerUnavailable: s.freezerUnavailable }, disk: s.disk });
        }
        default:
          return json(res, 404, { error: 'not_found', message: `POST ${p}` });
      }
    } catch (err) {
      if (res.headersSent) return void res.stream.close();
      fail(res, err);
    }
  }

  const server = http2.createServer({ settings: { maxConcurrentStreams: 1000 } }, (req, res) => void route(req, res));
  server.on('sessionError', (err) => log.warn({ err: err.message }, 'runner channel session failed'));

  /** One connection to the control plane: resolves when it closes. */
  function connectOnce(): Promise<void> {
    return new Promise((resolve, reject) => {
      const nonce = randomBytes(18).toString('base64url');
      const req = client.request(new URL(RUNNER_PATHS.connect, control), {
        method: 'GET',
        agent: false,
        headers: {
          connection: 'Upgrade',
          upgrade: RUNNER_PROTOCOL,
          [RUNNER_HEADERS.token]: o.token,
          [RUNNER_HEADERS.info]: Buffer.from(JSON.stringify(o.info)).toString('base64url'),
          [RUNNER_HEADERS.nonce]: nonce,
        },
      });
      req.on('error', reject);
      pending = req;
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          let message = Buffer.concat(chunks).toString('utf8').slice(0, 300);
          try {
            message = JSON.parse(message).message ?? message;
          } catch {
            // plain text
          }
          reject(Object.assign(new Error(`the control plane refused this runner (${res.statusCode}): ${message}`), { status: res.statusCode }));
        });
      });
      req.on('upgrade', (res, socket, head) => {
        if (!proofHolds(o.token, nonce, res.headers[RUNNER_HEADERS.proof] as string | undefined)) {
          socket.destroy();
          return reject(Object.assign(new Error('the control plane could not prove it is the one this token belongs to: not serving it'), { status: 0 }));
        }
        channel = socket;
        socket.setNoDelay(true);
        socket.setKeepAlive(true, 10_000);
        if (head.length) socket.unshift(head);
        server.emit('connection', socket);
        log.info({ control: control.origin, runner: o.info.name }, connectedOnce ? 'runner reconnected to the control plane' : 'runner connected to the control plane');
        connectedOnce = true;
        socket.once('close', () => {
          channel = null;
          resolve();
        });
      });
      req.end();
    });
  }

  let loop: Promise<void> | null = null;
  /** The connection attempt in flight (stop aborts it). */
  let pending: http.ClientRequest | null = null;
  /** Ends the wait before the next connection attempt (stop). */
  let wakeUp = () => {};
  return {
    runtimes,
    get connected() {
      return channel !== null;
    },
    get status() {
      return lastStatus;
    },

    /** Hosts runtimes and keeps the channel to the control plane up (reconnecting with back-off). */
    async start(): Promise<void> {
      mkdirSync(o.dataDir, { recursive: true, mode: 0o700 });
      await runtimes.start();
      // Self-fence: a runner cut off from the control plane for longer than LEASE_MS stops its runtimes,
      // before the control plane declares it lost (RUNNER_HEARTBEAT_TIMEOUT_MS) and places its users
      // elsewhere: with shared storage, two runtimes must never write one user's files at once.
      fenceTimer = setInterval(() => {
        if (Date.now() - lastSync < LEASE_MS || !runtimes.live().length) return;
        log.error({ silentMs: Date.now() - lastSync }, 'no word from the control plane: stopping every runtime here (their users may be placed elsewhere)');
        leases.clear();
        for (const l of runtimes.live()) void runtimes.stopUser(l.userId);
      }, 1000);
      fenceTimer.unref();
      let failures = 0;
      loop = (async () => {
        while (!stopping) {
          try {
            await connectOnce();
            failures = 0;
            if (!stopping) log.warn('the channel to the control plane closed: reconnecting');
          } catch (err) {
            failures++;
            const status = (err as { status?: number }).status;
            const msg = (err as Error).message;
            if (status === 401 || status === 403) log.error({ err: msg }, 'the control plane refused this runner token');
            else log.warn({ err: msg, attempt: failures }, 'could not reach the control plane');
          }
          if (stopping) break;
          const delay = Math.min(MAX_BACKOFF_MS, failures ? 500 * 2 ** Math.min(failures, 6) : 200);
          // A ref'd timer: a runner that cannot connect stays up and keeps trying (systemd would restart it anyway).
          await new Promise<void>((r) => {
            const t = setTimeout(r, delay);
            wakeUp = () => {
              clearTimeout(t);
              r();
            };
          });
        }
      })();
    },

    async stop(): Promise<void> {
      stopping = true;
      if (fenceTimer) clearInterval(fenceTimer);
      for (const w of watchers) w.end();
      pending?.destroy();
      wakeUp();
      channel?.destroy();
      server.close();
      await runtimes.stop();
      controlAgent.destroy();
      await loop?.catch(() => {});
    },
  };
}

export type RunnerAgent = ReturnType<typeof createRunnerAgent>;
