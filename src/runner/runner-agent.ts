import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import http2, { type Http2ServerRequest, type Http2ServerResponse } from 'node:http2';
import https from 'node:https';
import { dirname, join, normalize } from 'node:path';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { controlPlaneForbidden, createEgressDecider, type EgressDecider } from '../core/runtime/host/egress-decider.js';
import { parsePrivateAllow, type EgressRules } from '../core/runtime/host/egress-policy.js';
import { createEgressProxy } from '../core/runtime/host/egress-proxy.js';
import { AppError } from '../kernel/errors.js';
import type { Logger } from '../kernel/logger.js';
import { encodeFrame, frameReader, RUNNER_HEADERS, RUNNER_PATHS, RUNNER_PROTOCOL, RUNNER_WEBSOCKET_HEADER, proofHolds, type RunnerInfo } from '../core/runtime/host/runner-protocol.js';
import WebSocket from 'ws';
import type { RunnerNotice } from '../core/runtime/host/runner-links.js';
import type { RuntimeHandle } from '../core/runtime/host/runtime-transport.js';
import { createRuntimeLauncher } from '../core/runtime/host/runtime-launcher.js';
import { MANAGED_CONFIG_ROUTE, managedConfigDir, runtimeRoot, writeManagedConfig } from '../core/runtime/host/managed-config.js';
import { createRuntimeHost, tenantSharedDir, type HostRecords, type PoolStatus, type RuntimeIdentity, type RuntimeOwner } from '../core/runtime/host/runtime-host.js';
import { randomSecret } from '../lib/secrets.js';
import { workspacePath } from '../lib/data-paths.js';
import { answerFiles, WORKSPACE_FILES_ROUTE } from '../core/runtime/host/workspace-files.js';
import { answerSnapshots, snapshotStore, WORKSPACE_SNAPSHOTS_ROUTE } from '../core/runtime/host/workspace-snapshots.js';
import { ArchiveRefused, discard, hasCopy, importArchive, listCopies, markCopy, readCopy, setAside, userPaths } from './user-files.js';

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
  /** Time frozen after which a runtime is paged out to swap; 0 or absent: never. */
  pageOutAfterMs?: number;
  /** What bounds each runtime (memory, processes: null = off) and its /tmp's size; the quota comes with each start. */
  limits?: { memoryMaxBytes: number | null; pidsMax: number | null; tmpBytes: number };
  log: Logger;
}

const RULES_CACHE_MS = 2000;
/**
 * How long a runner keeps its runtimes without hearing from the control plane (it syncs every 5 s):
 * under the control plane's heartbeat timeout (30 s), so they are stopped here before anyone else
 * can be given their users. A control plane with another timeout (AGENTWS_RUNNER_HEARTBEAT_TIMEOUT_MS)
 * tells its lease with each sync.
 */
const LEASE_MS = 20_000;
const MAX_BACKOFF_MS = 30_000;
/** A sync tells the control plane which users' files are here (it sets aside those placed elsewhere since): the first of each channel, then this often. */
const COPIES_EVERY_MS = 5 * 60_000;
const COPIES_PER_SYNC = 5000;
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'host', 'proxy-connection', 'proxy-authorization', 'te', 'trailer']);

/** The lease the control plane gave this runner for a user: requests for the user carry its fence. */
interface Lease {
  tenantId: string;
  fence: number;
  /** When a start last asked for it (a lease outlives its runtime: one stopped idle keeps it here). */
  at: number;
}
/** A lease asked for this recently may have a runtime starting on it: its user's files are not dropped meanwhile. */
const LEASE_IN_USE_MS = 60_000;

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
  /** LEASE_MS, or what the control plane said with its last sync (two thirds of its heartbeat timeout). */
  let leaseMs = LEASE_MS;
  let fenceTimer: NodeJS.Timeout | null = null;
  /** Runtimes being configured by the control plane (through this channel) before the host hands them out. */
  const configuring = new Map<string, RuntimeHandle>();
  /** The channel the copies here were last reported on, and when (see /sync). */
  let copiesFor: Socket | null = null;
  let copiesAt = 0;
  let copiesFrom = 0;
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

  /** The fence this runner holds the user's lease under (0: none; the control plane then ignores the notice). */
  const fenceOf = (userId: string) => leases.get(userId)?.fence ?? 0;
  const notify = (notice: RunnerNotice) => {
    const line = `${JSON.stringify(notice)}\n`;
    for (const w of watchers) w.write(line);
  };

  // The host records nothing here: the control plane's database is written by the control plane, when
  // this runner tells it a runtime started (configure below) or stopped.
  const records: HostRecords = {
    started: async () => {},
    stopped: async (owner, pid, o) => {
      notify({ type: 'stopped', tenantId: owner.tenantId, userId: owner.userId, fence: fenceOf(owner.userId), pid });
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
    pageOutAfterMs: o.pageOutAfterMs,
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
    notify({ type: 'ready', tenantId: owner.tenantId, userId: owner.userId, fence: fenceOf(owner.userId), pid, authorization: handle.endpoint.authorization, directory: handle.directory });
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

  /**
   * Before a runtime starts on the user's files here: are they the copy the control plane says is current
   * (`filesFence`, the copy's marker)? If not (a drain left them here, or this runner was lost and the
   * user worked elsewhere meanwhile), they are set aside and the runtime starts on a fresh workspace.
   * Unmarked files (from before copies were marked) are current only for a placement from before too
   * (`filesFence` 0). Returns where they were set aside, if they were.
   */
  function checkCopy(owner: { tenantId: string; userId: string }, filesFence: number): string | null {
    if (!Number.isSafeInteger(filesFence) || filesFence < 0) return null;
    const copy = readCopy(o.dataDir, owner.userId);
    let where: string | null = null;
    if (copy ? copy.filesFence !== filesFence : filesFence !== 0 && hasCopy(o.dataDir, owner)) {
      where = setAside(o.dataDir, owner, `not the user's current copy (this copy: ${copy?.filesFence ?? 'unmarked'}; current: ${filesFence})`);
      if (where) log.warn({ userId: owner.userId, where }, 'set aside a copy of a user\'s files that is not their current one: their runtime starts on a fresh workspace');
    }
    markCopy(o.dataDir, owner, filesFence);
    return where;
  }

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
   * A WebSocket of a user's runtime placed here (a terminal), for the control plane: the channel's
   * HTTP/2 streams cannot be upgraded, so the runner opens it to the runtime and carries its messages as
   * frames (runner-protocol.ts) on this stream, both ways. 200 once it is open. The runtime is kept
   * awake while messages pass (a terminal is use, like any request).
   */
  async function bridgeSocket(userId: string, path: string, req: Http2ServerRequest, res: Http2ServerResponse) {
    const lease = leases.get(userId);
    const handle: RuntimeHandle | null = lease ? await runtimes.running({ tenantId: lease.tenantId, userId }) : null;
    const ep = handle?.endpoint;
    if (!ep?.socketPath && !ep?.url) {
      req.resume();
      return json(res, 503, { error: 'runtime_unavailable', message: 'the runtime is not running on this runner' });
    }
    const url = ep.socketPath ? `ws+unix://${ep.socketPath}:${path}` : new URL(path, ep.url!.replace(/^http/, 'ws')).toString();
    const ws = new WebSocket(url, { headers: { authorization: ep.authorization }, perMessageDeflate: false, handshakeTimeout: 10_000 });
    let open = false;
    const end = (code: number, reason: string) => {
      if (!res.writableEnded && !res.destroyed) res.end(encodeFrame({ kind: 'close', code, reason }));
    };
    ws.on('unexpected-response', (_r, up) => {
      up.resume();
      req.resume();
      json(res, up.statusCode === 404 ? 404 : 502, { error: 'runtime_refused', message: `the runtime refused the socket (HTTP ${up.statusCode})` });
      ws.terminate();
    });
    ws.on('error', (err) => {
      if (open) return end(1011, err.message);
      req.resume();
      if (!res.headersSent) json(res, 502, { error: 'runtime_unavailable', message: err.message });
    });
    ws.on('open', () => {
      open = true;
      (ws as unknown as { _socket?: { setNoDelay?: (on: boolean) => void } })._socket?.setNoDelay?.(true);
      // Sent at once (the compat layer responds on writeHead): the control plane waits for it.
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const read = frameReader((f) => {
        runtimes.touch(userId);
        if (f.kind === 'close') ws.close();
        else if (ws.readyState === WebSocket.OPEN) ws.send(f.data, { binary: f.kind === 'binary' });
      });
      req.on('data', (c: Buffer) => {
        try {
          read(c);
        } catch {
          ws.terminate();
        }
      });
      req.on('end', () => ws.close());
    });
    ws.on('message', (data, isBinary) => {
      runtimes.touch(userId);
      if (!res.writableEnded) res.write(encodeFrame(isBinary ? { kind: 'binary', data: data as Buffer } : { kind: 'text', data: data.toString() }));
    });
    ws.on('close', (code, reason) => end(code, reason.toString()));
    res.on('close', () => ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING ? ws.terminate() : undefined);
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

  /** Whether this runner holds the user's files for that tenant: a lease, or their current copy here. */
  function holdsFiles(owner: { tenantId: string; userId: string }): boolean {
    // Ids first: they name paths under the data dir.
    if (!userPaths(owner)) return false;
    const lease = leases.get(owner.userId);
    return lease ? lease.tenantId === owner.tenantId : readCopy(o.dataDir, owner.userId)?.tenantId === owner.tenantId;
  }

  /**
   * Snapshots of a person's workspace held here (what each turn changed, undo and redo: the control
   * plane's turn-snapshots.ts), taken and restored here with the confined walk of workspace-snapshots.ts
   * into the store beside their runtime's files. Only for a user this runner holds, in the tenant named.
   */
  async function serveSnapshots(userId: string, op: string, q: URLSearchParams, req: Http2ServerRequest, res: Http2ServerResponse) {
    const owner = { tenantId: q.get('tenantId') ?? '', userId };
    if (!holdsFiles(owner)) {
      req.resume();
      return json(res, 404, { error: 'not_found', message: 'your workspace is not on this runner host' });
    }
    const body = await readJson(req);
    if (!body || typeof body !== 'object' || Array.isArray(body)) return json(res, 400, { error: 'validation_failed', message: 'a JSON object' });
    const a = await answerSnapshots(join(o.dataDir, workspacePath(owner)), snapshotStore(runtimeRoot(o.dataDir, userId)), op, body as Record<string, unknown>);
    return json(res, a.status, a.json);
  }

  /**
   * A person's workspace files (browse, read, archive, upload: the control plane's workspace files
   * service), answered here with the same confined walk as on serve (workspace-files.ts), whether or not
   * their runtime runs. Only for a user this runner holds, or whose current copy is here, in the tenant
   * named: never another user's files.
   */
  async function serveFiles(userId: string, op: string, q: URLSearchParams, req: Http2ServerRequest, res: Http2ServerResponse) {
    const owner = { tenantId: q.get('tenantId') ?? '', userId };
    if (!holdsFiles(owner)) {
      req.resume();
      return json(res, 404, { error: 'workspace_empty', message: 'your workspace has no files on this runner host yet' });
    }
    const a = await answerFiles(join(o.dataDir, workspacePath(owner)), op, q, req as unknown as Readable);
    if ('json' in a) return json(res, a.status, a.json);
    res.writeHead(a.status, a.headers);
    if ('writeTo' in a) {
      // Written as the walk reads (an archive): a failure midway cuts the stream, which the control plane sees.
      await a.writeTo(res).then(
        () => res.end(),
        () => res.stream.close(),
      );
      return;
    }
    a.stream.on('error', () => res.stream.close());
    res.on('close', () => a.stream.destroy());
    a.stream.pipe(res);
  }

  /**
   * A user's files as a tar stream (a drain moves them to another runner): their workspace and their
   * runtime's home (its sessions database, so transcripts move too); never the sockets or scratch files.
   * Only for a user whose runtime is stopped here (the control plane stops it first).
   */
  function exportUser(tenantId: string, userId: string, res: Http2ServerResponse) {
    const p = userPaths({ tenantId, userId });
    if (!p) return json(res, 400, { error: 'validation_failed', message: 'tenantId and userId' });
    if (runtimes.live().some((l) => l.userId === userId)) return json(res, 409, { error: 'runtime_running', message: 'stop the runtime before moving its files' });
    const present = [p.workspace, p.home].filter((x) => existsSync(join(o.dataDir, x)));
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

  /**
   * A drain's copy of a user's files, from the runner they leave (which may be hostile): inspected and
   * extracted apart, then put in place of any copy here, marked as the copy current under `filesFence`
   * (user-files.ts importArchive). A refused archive changes nothing here (422 archive_refused).
   */
  async function importUser(tenantId: string, userId: string, filesFence: number, req: Http2ServerRequest, res: Http2ServerResponse) {
    if (!userPaths({ tenantId, userId }) || !Number.isSafeInteger(filesFence) || filesFence <= 0) {
      req.resume();
      return json(res, 400, { error: 'validation_failed', message: 'tenantId, userId and filesFence' });
    }
    if (runtimes.live().some((l) => l.userId === userId)) {
      req.resume();
      return json(res, 409, { error: 'runtime_running', message: 'the user\'s runtime runs here: not replacing their files' });
    }
    try {
      const r = await importArchive(o.dataDir, { tenantId, userId, filesFence }, req as unknown as Readable);
      return json(res, 200, { imported: true, ...r });
    } catch (err) {
      req.resume();
      if (err instanceof ArchiveRefused) {
        log.error({ userId, err: err.message }, 'a drain\'s archive of a user\'s files was refused: nothing here changed');
        return json(res, 422, { error: 'archive_refused', message: err.message });
      }
      return json(res, 500, { error: 'import_failed', message: (err as Error).message.slice(0, 300) });
    }
  }

  /**
   * The files of a user this runner does not hold (no lease, no runtime) go out of every sandbox's reach:
   * removed (`discard`: a drain confirmed their copy elsewhere) or set aside for an operator (`setAside`:
   * they are not the user's current copy). Null: the user is held here, nothing is done.
   */
  function dropCopy(owner: { tenantId: string; userId: string }, how: 'discard' | 'setAside', why: string): { done: boolean; where?: string | null } | null {
    if (!userPaths(owner)) return { done: false };
    // The control plane asks only for users placed elsewhere: a lease still here is left over (its
    // runtime stopped idle), unless a start asked for it just now.
    const lease = leases.get(owner.userId);
    if ((lease && Date.now() - lease.at < LEASE_IN_USE_MS) || runtimes.live().some((l) => l.userId === owner.userId)) return null;
    leases.delete(owner.userId);
    if (how === 'discard') return { done: discard(o.dataDir, owner) };
    const where = setAside(o.dataDir, owner, why);
    if (where) log.warn({ userId: owner.userId, tenantId: owner.tenantId, where, why }, 'a copy of a user\'s files that is not their current one was set aside (an operator may recover it)');
    return { done: where !== null, where };
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
        if (slash >= 0 && rest.slice(slash).startsWith(`${WORKSPACE_SNAPSHOTS_ROUTE}/`) && req.method === 'POST') return await serveSnapshots(userId, rest.slice(slash + WORKSPACE_SNAPSHOTS_ROUTE.length + 1), url.searchParams, req, res);
        if (slash >= 0 && rest.slice(slash).startsWith(`${WORKSPACE_FILES_ROUTE}/`)) return await serveFiles(userId, rest.slice(slash + WORKSPACE_FILES_ROUTE.length + 1), url.searchParams, req, res);
        runtimes.touch(userId);
        if (req.method === 'POST' && req.headers[RUNNER_WEBSOCKET_HEADER]) return await bridgeSocket(userId, `${slash < 0 ? '/' : rest.slice(slash)}${url.search}`, req, res);
        return await passToRuntime(userId, `${slash < 0 ? '/' : rest.slice(slash)}${url.search}`, req, res);
      }
      if (p === '/watch' && req.method === 'GET') {
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        watchers.add(res);
        res.on('close', () => watchers.delete(res));
        // A control-plane process that takes the channel learns what already runs.
        for (const l of runtimes.live()) {
          const h = l.pid ? await runtimes.running(l) : null;
          if (h && l.pid) res.write(`${JSON.stringify({ type: 'ready', tenantId: l.tenantId, userId: l.userId, fence: fenceOf(l.userId), pid: l.pid, authorization: h.endpoint.authorization, directory: h.directory })}\n`);
        }
        return;
      }
      if (p === '/export' && req.method === 'GET') return exportUser(url.searchParams.get('tenantId') ?? '', url.searchParams.get('userId') ?? '', res);
      if (p === '/import' && req.method === 'POST') return await importUser(url.searchParams.get('tenantId') ?? '', url.searchParams.get('userId') ?? '', Number(url.searchParams.get('filesFence')), req, res);
      if (req.method !== 'POST') return json(res, 404, { error: 'not_found', message: `${req.method} ${p}` });
      const body = await readJson(req);
      switch (p) {
        case '/acquire': {
          const owner = { tenantId: String(body.tenantId), userId: String(body.userId) };
          if (!userPaths(owner)) return json(res, 400, { error: 'validation_failed', message: 'tenantId and userId' });
          const fence = Number(body.fence);
          leases.set(owner.userId, { tenantId: owner.tenantId, fence, at: Date.now() });
          const quota = Number(body.diskQuotaBytes);
          quotas.set(owner.userId, Number.isFinite(quota) && quota > 0 ? quota : null);
          if (Array.isArray(body.files)) writeShared(owner.tenantId, body.files);
          // The runtime starts on the user's current copy only: any other copy here is set aside first.
          const setAsideAt = runtimes.live().some((l) => l.userId === owner.userId) ? null : checkCopy(owner, Number(body.filesFence ?? -1));
          const handle = await runtimes.acquire(owner);
          const pid = runtimes.live().find((l) => l.userId === owner.userId)?.pid ?? 0;
          return json(res, 200, { pid, authorization: handle.endpoint.authorization, directory: handle.directory, ...(setAsideAt ? { setAside: setAsideAt } : {}) });
        }
        case '/discard': {
          const r = dropCopy({ tenantId: String(body.tenantId), userId: String(body.userId) }, 'discard', 'moved by a drain');
          return r ? json(res, 200, { discarded: r.done }) : json(res, 409, { error: 'user_held', message: 'the user is placed here: not removing their files' });
        }
        case '/set-aside': {
          // Users placed elsewhere since (the control plane's answer to this runner's copies): their files here are not current.
          const done: Array<{ tenantId: string; userId: string; where: string }> = [];
          for (const u of Array.isArray(body.users) ? (body.users as Array<{ tenantId?: unknown; userId?: unknown; filesFence?: unknown }>).slice(0, 10_000) : []) {
            const owner = { tenantId: String(u.tenantId), userId: String(u.userId) };
            if (readCopy(o.dataDir, owner.userId)?.filesFence === Number(u.filesFence)) continue;
            const r = dropCopy(owner, 'setAside', 'the user is placed on another runner since this copy was current');
            if (r?.where) done.push({ ...owner, where: r.where });
          }
          return json(res, 200, { setAside: done });
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
          // Bounded: a lease is never shorter than a second (a sync that says nonsense must not stop every runtime).
          if (typeof body.leaseMs === 'number' && Number.isFinite(body.leaseMs)) leaseMs = Math.min(Math.max(body.leaseMs, 1000), 3_600_000);
          const s = runtimes.status();
          lastStatus = s;
          const users = runtimes.live().map((l) => ({ userId: l.userId, state: l.state, running: l.running, idleMs: l.idleMs }));
          // Which users' files are here but not held: at the first sync of each channel (a runner that comes
          // back after being lost or frozen), then now and then. The control plane answers with those placed
          // elsewhere since (POST /set-aside).
          let copies: ReturnType<typeof listCopies> | undefined;
          if (copiesFor !== channel || Date.now() - copiesAt > COPIES_EVERY_MS) {
            if (copiesFor !== channel) copiesFrom = 0;
            copiesFor = channel;
            copiesAt = Date.now();
            // At most COPIES_PER_SYNC a time (an answer is bounded; a shared storage may hold many users' files): the rest at the next ones.
            const running = new Set(runtimes.live().map((l) => l.userId));
            const all = listCopies(o.dataDir).filter((c) => !held.has(c.userId) && !running.has(c.userId)).sort((a, b) => (a.userId < b.userId ? -1 : 1));
            if (copiesFrom >= all.length) copiesFrom = 0;
            copies = all.slice(copiesFrom, copiesFrom + COPIES_PER_SYNC);
            copiesFrom += COPIES_PER_SYNC;
          }
          // Each user's figures against their limits, and which limits hold here: the control plane keeps
          // them for status (for users it has placed here only).
          const usage = s.usage.map(({ tenantId: _t, ...u }) => u);
          const limits = { ...s.limits, freezer: s.freezer, freezerUnavailable: s.freezerUnavailable };
          return json(res, 200, { capacity: s.capacity, resident: s.resident, busy: s.busy, frozen: s.frozen, pagedOut: s.pagedOut, starting: s.starting, runtimesMemoryBytes: s.runtimesMemoryBytes, memory: s.memory, users, usage, limits, disk: s.disk, ...(copies ? { copies } : {}) });
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
      // Self-fence: a runner cut off from the control plane for longer than its lease stops its runtimes,
      // before the control plane declares it lost (RUNNER_HEARTBEAT_TIMEOUT_MS) and places its users
      // elsewhere: with shared storage, two runtimes must never write one user's files at once.
      fenceTimer = setInterval(() => {
        if (Date.now() - lastSync < leaseMs || !runtimes.live().length) return;
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
