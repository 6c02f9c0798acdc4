import type { Database } from '../../db/database.js';
import type { SecretBox } from '../../lib/secret-box.js';
import { UnavailableError, UpstreamError } from '../errors.js';
import { isManagedRuntime, type ManagedRuntime, type RuntimeEndpoint } from './opencode-process.js';
import type { RuntimeRepo } from './runtime.repo.js';

/**
 * The one place that speaks opencode's HTTP API (1.18.33). Everything else in the core calls these
 * methods with our own vocabulary; runtime specifics (paths, `?directory=`, Basic auth, status codes)
 * stay here.
 */
const TIMEOUT_MS = 10_000;

export const runtimeUnavailable = (why: string) =>
  new UnavailableError(`the agent runtime is not reachable: ${why}`, {
    code: 'runtime_unavailable',
    hint: 'Check that `aws serve` is running (it manages the runtime), or AGENTWS_RUNTIME_URL for an external runtime.',
  });

/** Where the runtime listens, found the way this process can: its own child, the config, or the database. */
export interface RuntimeConnector {
  /** Resolves the endpoint; `signal` cuts short a wait for a (re)starting managed runtime. */
  endpoint(signal?: AbortSignal): Promise<RuntimeEndpoint>;
  /** Forget a cached endpoint after a connection failure (the managed runtime may have restarted). */
  invalidate(): void;
}

export function createRuntimeConnector(deps: {
  mode: 'managed' | 'external';
  url: string | null;
  password: string | null;
  db: Database;
  box: SecretBox;
  repo: RuntimeRepo;
  /** The data directory whose managed runtime this is (its HOME identifies the process as ours). */
  dataDir: string;
  /** Set in the process that hosts the managed runtime (`aws serve`). */
  managed?: () => ManagedRuntime | null;
}): RuntimeConnector {
  if (deps.mode === 'external') {
    const fixed: RuntimeEndpoint = { url: deps.url!, authorization: `Basic ${Buffer.from(`opencode:${deps.password}`).toString('base64')}` };
    return { endpoint: async () => fixed, invalidate: () => {} };
  }
  let cached: { at: number; pid: number; endpoint: RuntimeEndpoint } | null = null;
  return {
    async endpoint(signal) {
      const own = deps.managed?.();
      if (own) {
        // Hosting it here: wait briefly through a (re)start rather than failing the request at once.
        for (let i = 0; i < 100 && own.coming && !signal?.aborted; i++) await new Promise((r) => setTimeout(r, 100));
        if (!own.endpoint) throw runtimeUnavailable(own.coming ? 'the managed runtime is (re)starting' : 'the managed runtime is stopped');
        return own.endpoint;
      }
      // Another process's runtime, found through its record. The record is trusted only while the
      // recorded process runs and is our runtime: once it is gone, its port may be anybody's.
      if (cached && Date.now() - cached.at < 30_000 && isManagedRuntime(cached.pid, deps.dataDir)) return cached.endpoint;
      cached = null;
      const rec = await deps.repo.endpoint(deps.db);
      if (!rec) throw runtimeUnavailable('the managed runtime is not running (no `aws serve` has started it)');
      if (!isManagedRuntime(rec.pid, deps.dataDir)) {
        throw runtimeUnavailable(`the managed runtime is not running (the one recorded at ${rec.url}${rec.pid ? `, pid ${rec.pid},` : ''} is gone; \`aws serve\` starts a new one)`);
      }
      const password = deps.box.open(rec.passwordSealed);
      cached = { at: Date.now(), pid: rec.pid!, endpoint: { url: rec.url, authorization: `Basic ${Buffer.from(`opencode:${password}`).toString('base64')}` } };
      return cached.endpoint;
    },
    invalidate() {
      cached = null;
    },
  };
}

export interface RuntimeMessage {
  info: { id: string; sessionID: string; role: string; time: { created: number; completed?: number }; [k: string]: unknown };
  parts: Array<{ id: string; sessionID: string; messageID: string; type: string; [k: string]: unknown }>;
}

export interface PromptBody {
  messageID: string;
  parts: Array<Record<string, unknown>>;
  model?: { providerID: string; modelID: string };
  agent?: string;
  system?: string;
  tools?: Record<string, boolean>;
}

export function createRuntimeClient(connector: RuntimeConnector) {
  async function call(method: string, path: string, options: { directory?: string; body?: unknown; timeoutMs?: number } = {}): Promise<{ status: number; json: unknown }> {
    const ep = await connector.endpoint();
    const sep = path.includes('?') ? '&' : '?';
    const url = `${ep.url}${path}${options.directory ? `${sep}directory=${encodeURIComponent(options.directory)}` : ''}`;
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers: { authorization: ep.authorization, ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}) },
        body: options.body !== undefined ? JSON.stringify(options.body) : undefined,
        signal: AbortSignal.timeout(options.timeoutMs ?? TIMEOUT_MS),
      });
    } catch (err) {
      connector.invalidate();
      throw runtimeUnavailable((err as Error).name === 'TimeoutError' ? `${method} ${path.split('?')[0]} timed out` : (err as Error).message);
    }
    const text = await res.text();
    if (res.status === 401) {
      // A managed runtime that restarted has a new password (and record): read it again next time.
      connector.invalidate();
      throw new UpstreamError('the agent runtime refused our credentials', { code: 'runtime_auth_failed', hint: 'Check AGENTWS_RUNTIME_PASSWORD.' });
    }
    let json: unknown = undefined;
    if (text && res.headers.get('content-type')?.includes('json')) json = JSON.parse(text);
    return { status: res.status, json };
  }

  const fail = (what: string, r: { status: number; json: unknown }) =>
    new UpstreamError(`the agent runtime failed to ${what} (HTTP ${r.status})`, { code: 'runtime_error', details: { status: r.status } });

  return {
    connector,

    async health(): Promise<{ healthy: boolean; version: string }> {
      const r = await call('GET', '/global/health', { timeoutMs: 3000 });
      if (r.status !== 200) throw fail('report health', r);
      return r.json as { healthy: boolean; version: string };
    },

    async getConfig(): Promise<Record<string, any>> {
      const r = await call('GET', '/global/config');
      if (r.status !== 200) throw fail('read its config', r);
      return r.json as Record<string, any>;
    },

    /** Deep-merges into the runtime's global config (persisted by the runtime; arrays are replaced). */
    async patchConfig(config: Record<string, unknown>): Promise<void> {
      const r = await call('PATCH', '/global/config', { body: config, timeoutMs: 30_000 });
      if (r.status !== 200) throw fail(`accept the config (${JSON.stringify(r.json)?.slice(0, 300)})`, r);
    },

    async createSession(directory: string, body: { title: string }): Promise<string> {
      const r = await call('POST', '/session', { directory, body });
      if (r.status !== 200) throw fail('create a session', r);
      return (r.json as { id: string }).id;
    },

    async promptAsync(directory: string, sessionId: string, body: PromptBody): Promise<void> {
      const r = await call('POST', `/session/${encodeURIComponent(sessionId)}/prompt_async`, { directory, body, timeoutMs: 10_000 });
      if (r.status !== 204 && r.status !== 200) throw fail(`accept the prompt (${JSON.stringify(r.json)?.slice(0, 300)})`, r);
    },

    async messageExists(directory: string, sessionId: string, messageId: string): Promise<boolean> {
      const r = await call('GET', `/session/${encodeURIComponent(sessionId)}/message/${encodeURIComponent(messageId)}`, { directory });
      if (r.status === 200) return true;
      if (r.status === 404) return false;
      throw fail('look up a message', r);
    },

    async messages(directory: string, sessionId: string): Promise<RuntimeMessage[]> {
      const r = await call('GET', `/session/${encodeURIComponent(sessionId)}/message`, { directory });
      if (r.status === 404) return [];
      if (r.status !== 200) throw fail('list messages', r);
      return r.json as RuntimeMessage[];
    },

    /** False when the runtime has no such pending request (unknown, or already answered). */
    async replyPermission(directory: string, requestId: string, reply: 'once' | 'always' | 'reject', message?: string): Promise<boolean> {
      const r = await call('POST', `/permission/${encodeURIComponent(requestId)}/reply`, { directory, body: { reply, ...(message ? { message } : {}) } });
      if (r.status === 404) return false;
      if (r.status !== 200) throw fail('take the permission reply', r);
      return true;
    },

    async abort(directory: string, sessionId: string): Promise<void> {
      const r = await call('POST', `/session/${encodeURIComponent(sessionId)}/abort`, { directory });
      if (r.status !== 200 && r.status !== 404) throw fail('abort the session', r);
    },
  };
}

export type RuntimeClient = ReturnType<typeof createRuntimeClient>;
