/**
 * Members of a bench's tenant, signed in, and one person's turn through the API: the runtime benches
 * (runtime-pool, runtime-waves) act as many people at once, each with their own runtime.
 */
import { performance } from 'node:perf_hooks';
import { SignJWT } from 'jose';
import pg from 'pg';
import { configValue, openStream, type SseStream } from './agent-bench-utils.js';
import { waitUntil } from '../helpers/poll.js';

export interface Member {
  userId: string;
  token: string;
}

/** Events the session stream adds itself; every other type comes from the user's runtime. */
const SERVICE_EVENTS = new Set(['runtime.waiting', 'runtime.starting', 'runtime.started', 'turn.sent']);

/**
 * `n` member users of the init tenant (handles `<prefix><i>`), each with a recorded sign-in and an access
 * token signed the way the service signs them (the bench holds the config's JWT secret, as the operator does).
 */
export async function benchMembers(databaseUrl: string, config: string, tenantId: string, n: number, prefix = 'bench'): Promise<Member[]> {
  const c = new pg.Client({ connectionString: databaseUrl });
  await c.connect();
  const key = new TextEncoder().encode(configValue(config, 'AGENTWS_JWT_SECRET'));
  const issuer = configValue(config, 'AGENTWS_PUBLIC_URL').replace(/\/+$/, '');
  try {
    const out: Member[] = [];
    for (let i = 0; i < n; i++) {
      const { rows } = await c.query<{ id: string }>(`insert into users (tenant_id, handle, email, display_name) values ($1, $2, $3, $2) returning id`, [tenantId, `${prefix}${i}`, `${prefix}${i}@bench.example`]);
      const userId = rows[0].id;
      await c.query(`insert into user_roles (tenant_id, user_id, role_id, assigned_by) select $1, $2, id, 'bench' from roles where tenant_id = $1 and name = 'member'`, [tenantId, userId]);
      const now = Math.floor(Date.now() / 1000);
      const sid = (await c.query<{ id: string }>(`insert into auth_sign_ins (tenant_id, user_id, auth_time, expires_at) values ($1, $2, to_timestamp($3), to_timestamp($3 + 604800)) returning id`, [tenantId, userId, now])).rows[0].id;
      const token = await new SignJWT({ tid: tenantId, roles: ['member'], typ: 'access', sid, auth_time: now })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setSubject(userId)
        .setIssuer(issuer)
        .setAudience('agentws')
        .setIssuedAt(now)
        .setExpirationTime(now + 4 * 3600)
        .setJti(crypto.randomUUID())
        .sign(key);
      out.push({ userId, token });
    }
    return out;
  } finally {
    await c.end();
  }
}

export async function call(base: string, token: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

/** What one turn looked like from the person's side: times from the prompt (ms), and what the stream said. */
export interface TurnTimes {
  /** To the first event of any kind (the service's own included: what the person first sees). */
  toAnyEvent: number;
  /** To the first event the runtime sent. */
  toEvent: number;
  /** To the first streamed word of the answer. */
  toText: number;
  to202: number;
  /** The service events the stream carried (runtime.waiting, runtime.starting...). */
  said: string[];
  /** The turn ended in session.error. */
  failed: string | null;
}

/**
 * One turn as a person: a session (new, or `sessionId`), its stream open, the prompt sent `typingMs`
 * after the stream opened, then the turn followed to its end (session.idle or session.error).
 */
export async function personTurn(base: string, m: Member, o: { typingMs?: number; sessionId?: string; text?: string; timeoutMs?: number } = {}): Promise<TurnTimes & { sessionId: string }> {
  let id = o.sessionId;
  if (!id) {
    const created = await call(base, m.token, 'POST', '/v1/sessions', { title: 'bench' });
    if (created.status !== 201) throw new Error(`create session: ${created.status} ${JSON.stringify(created.json)}`);
    id = created.json.sessionId as string;
  }
  let any = 0;
  let first = 0;
  let text = 0;
  let idle = false;
  let failed: string | null = null;
  const said: string[] = [];
  const stream: SseStream = await openStream(`${base}/v1/sessions/${id}/events`, { authorization: `Bearer ${m.token}` }, (data, t) => {
    const ev = JSON.parse(data) as { type: string; properties: any };
    if (!any) any = t;
    if (SERVICE_EVENTS.has(ev.type)) said.push(ev.type);
    else if (!first) first = t;
    if (!text && ev.type === 'message.part.delta') text = t;
    if (ev.type === 'session.idle') idle = true;
    if (ev.type === 'session.error') failed = String(ev.properties?.error?.message ?? ev.properties?.error?.data?.message ?? 'error');
  });
  try {
    if (o.typingMs) await new Promise((r) => setTimeout(r, o.typingMs));
    const t0 = performance.now();
    const res = await call(base, m.token, 'POST', `/v1/sessions/${id}/prompt`, { text: o.text ?? 'Say hello. [short]', agent: 'build' });
    const t202 = performance.now();
    if (res.status !== 202) throw new Error(`prompt: ${res.status} ${JSON.stringify(res.json)}`);
    await waitUntil('the end of the turn', () => idle || failed !== null, { timeoutMs: o.timeoutMs ?? 120_000, intervalMs: 5 });
    return { sessionId: id, toAnyEvent: any - t0, toEvent: first - t0, toText: text ? text - t0 : NaN, to202: t202 - t0, said, failed };
  } finally {
    stream.close();
  }
}

/**
 * The scripted model's own time to its first word (a streamed chat completion asked directly, `n`
 * times): the floor under any turn's first streamed text, measured in the same run.
 */
export async function modelFirstWordMs(llmUrl: string, n = 10): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const res = await fetch(`${llmUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake-model', stream: true, messages: [{ role: 'user', content: 'Say hello. [short]' }] }),
    });
    const reader = res.body!.getReader();
    let seen = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      seen += Buffer.from(value).toString('utf8');
      if (seen.includes('"content"')) {
        out.push(performance.now() - t0);
        break;
      }
    }
    await reader.cancel().catch(() => {});
  }
  return out;
}
