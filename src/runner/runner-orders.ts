import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { Socket } from 'node:net';
import { dirname, join, normalize } from 'node:path';
import { MANAGED_CONFIG_ROUTE } from '../core/runtime/host/managed-config.js';
import { RUNNER_WEBSOCKET_HEADER } from '../core/runtime/host/runner-protocol.js';
import { tenantSharedDir } from '../core/runtime/host/runtime-host.js';
import { WORKSPACE_FILES_ROUTE } from '../core/runtime/host/workspace-files.js';
import { WORKSPACE_SNAPSHOTS_ROUTE } from '../core/runtime/host/workspace-snapshots.js';
import type { Logger } from '../kernel/logger.js';
import { fail, json, readJson } from './order-replies.js';
import { fenceOf, type RunnerRuntimes, type RunnerState } from './runner-state.js';
import { createRuntimePassthrough } from './runtime-passthrough.js';
import { createUserFileOrders } from './user-file-orders.js';
import { listCopies, readCopy, userPaths } from './user-files.js';

/** A sync tells the control plane which users' files are here (it sets aside those placed elsewhere since): the first of each channel, then this often. */
const COPIES_EVERY_MS = 5 * 60_000;
const COPIES_PER_SYNC = 5000;

/**
 * What the control plane asks of this runner over its channel (each order an HTTP/2 request): start and
 * stop users' runtimes, sync the leases, pass requests to a runtime, move and answer users' files.
 */
export function createRunnerOrders(o: { dataDir: string; state: RunnerState; runtimes: RunnerRuntimes; log: Logger; channel: () => Socket | null }) {
  const { state, runtimes, log } = o;
  const passthrough = createRuntimePassthrough(o);
  const files = createUserFileOrders(o);
  /** The channel the copies here were last reported on, and when (see /sync). */
  let copiesFor: Socket | null = null;
  let copiesAt = 0;
  let copiesFrom = 0;

  /** The tenant's shared files (promoted skills) as the control plane sent them. */
  function writeShared(tenantId: string, shared: Array<{ path: string; content: string }>) {
    const root = tenantSharedDir(o.dataDir, tenantId);
    for (const f of shared) {
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

  return async function route(req: Http2ServerRequest, res: Http2ServerResponse): Promise<void> {
    const url = new URL(req.url, 'http://runner');
    const p = url.pathname;
    try {
      if (p.startsWith('/rt/')) {
        const rest = p.slice(4);
        const slash = rest.indexOf('/');
        const userId = decodeURIComponent(slash < 0 ? rest : rest.slice(0, slash));
        if (slash >= 0 && rest.slice(slash) === MANAGED_CONFIG_ROUTE && req.method === 'PUT') return await passthrough.writeConfig(userId, req, res);
        if (slash >= 0 && rest.slice(slash).startsWith(`${WORKSPACE_SNAPSHOTS_ROUTE}/`) && req.method === 'POST') return await files.serveSnapshots(userId, rest.slice(slash + WORKSPACE_SNAPSHOTS_ROUTE.length + 1), url.searchParams, req, res);
        if (slash >= 0 && rest.slice(slash).startsWith(`${WORKSPACE_FILES_ROUTE}/`)) return await files.serveFiles(userId, rest.slice(slash + WORKSPACE_FILES_ROUTE.length + 1), url.searchParams, req, res);
        runtimes.touch(userId);
        if (req.method === 'POST' && req.headers[RUNNER_WEBSOCKET_HEADER]) return await passthrough.bridgeSocket(userId, `${slash < 0 ? '/' : rest.slice(slash)}${url.search}`, req, res);
        return await passthrough.passToRuntime(userId, `${slash < 0 ? '/' : rest.slice(slash)}${url.search}`, req, res);
      }
      if (p === '/watch' && req.method === 'GET') {
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        state.watchers.add(res);
        res.on('close', () => state.watchers.delete(res));
        // A control-plane process that takes the channel learns what already runs.
        for (const l of runtimes.live()) {
          const h = l.pid ? await runtimes.running(l) : null;
          if (h && l.pid) res.write(`${JSON.stringify({ type: 'ready', tenantId: l.tenantId, userId: l.userId, fence: fenceOf(state, l.userId), pid: l.pid, authorization: h.endpoint.authorization, directory: h.directory })}\n`);
        }
        return;
      }
      if (p === '/export' && req.method === 'GET') return files.exportUser(url.searchParams.get('tenantId') ?? '', url.searchParams.get('userId') ?? '', res);
      if (p === '/import' && req.method === 'POST') return await files.importUser(url.searchParams.get('tenantId') ?? '', url.searchParams.get('userId') ?? '', Number(url.searchParams.get('filesFence')), req, res);
      if (req.method !== 'POST') return json(res, 404, { error: 'not_found', message: `${req.method} ${p}` });
      const body = await readJson(req);
      switch (p) {
        case '/acquire': {
          const owner = { tenantId: String(body.tenantId), userId: String(body.userId) };
          if (!userPaths(owner)) return json(res, 400, { error: 'validation_failed', message: 'tenantId and userId' });
          const fence = Number(body.fence);
          state.leases.set(owner.userId, { tenantId: owner.tenantId, fence, at: Date.now() });
          const quota = Number(body.diskQuotaBytes);
          state.quotas.set(owner.userId, Number.isFinite(quota) && quota > 0 ? quota : null);
          if (Array.isArray(body.files)) writeShared(owner.tenantId, body.files);
          // The runtime starts on the user's current copy only: any other copy here is set aside first.
          const setAsideAt = runtimes.live().some((l) => l.userId === owner.userId) ? null : files.checkCopy(owner, Number(body.filesFence ?? -1));
          const handle = await runtimes.acquire(owner);
          const pid = runtimes.live().find((l) => l.userId === owner.userId)?.pid ?? 0;
          return json(res, 200, { pid, authorization: handle.endpoint.authorization, directory: handle.directory, ...(setAsideAt ? { setAside: setAsideAt } : {}) });
        }
        case '/discard': {
          const r = files.dropCopy({ tenantId: String(body.tenantId), userId: String(body.userId) }, 'discard', 'moved by a drain');
          return r ? json(res, 200, { discarded: r.done }) : json(res, 409, { error: 'user_held', message: 'the user is placed here: not removing their files' });
        }
        case '/set-aside': {
          // Users placed elsewhere since (the control plane's answer to this runner's copies): their files here are not current.
          const done: Array<{ tenantId: string; userId: string; where: string }> = [];
          for (const u of Array.isArray(body.users) ? (body.users as Array<{ tenantId?: unknown; userId?: unknown; filesFence?: unknown }>).slice(0, 10_000) : []) {
            const owner = { tenantId: String(u.tenantId), userId: String(u.userId) };
            if (readCopy(o.dataDir, owner.userId)?.filesFence === Number(u.filesFence)) continue;
            const r = files.dropCopy(owner, 'setAside', 'the user is placed on another runner since this copy was current');
            if (r?.where) done.push({ ...owner, where: r.where });
          }
          return json(res, 200, { setAside: done });
        }
        case '/stop':
          await runtimes.stopUser(String(body.userId));
          state.leases.delete(String(body.userId));
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
            const mine = state.leases.get(l.userId);
            if (fence === undefined || (mine && mine.fence !== fence)) {
              log.warn({ userId: l.userId }, 'stopping a runtime whose user is no longer placed on this runner');
              state.leases.delete(l.userId);
              void runtimes.stopUser(l.userId);
            }
          }
          for (const [userId, fence] of held) {
            const l = state.leases.get(userId);
            if (l) l.fence = fence;
          }
          state.lastSync = Date.now();
          // Bounded: a lease is never shorter than a second (a sync that says nonsense must not stop every runtime).
          if (typeof body.leaseMs === 'number' && Number.isFinite(body.leaseMs)) state.leaseMs = Math.min(Math.max(body.leaseMs, 1000), 3_600_000);
          const s = runtimes.status();
          state.lastStatus = s;
          const users = runtimes.live().map((l) => ({ userId: l.userId, state: l.state, running: l.running, idleMs: l.idleMs }));
          // Which users' files are here but not held: at the first sync of each channel (a runner that comes
          // back after being lost or frozen), then now and then. The control plane answers with those placed
          // elsewhere since (POST /set-aside).
          let copies: ReturnType<typeof listCopies> | undefined;
          const channel = o.channel();
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
  };
}
