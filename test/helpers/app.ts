import { SignJWT } from 'jose';
import { openCore, type OpenedCore } from '../../src/cli/open-core.js';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger, type Logger } from '../../src/kernel/logger.js';
import { buildApp, type App } from '../../src/http/build-app.js';
import type { Clock } from '../../src/lib/clock.js';
import type { Logger as PinoLogger } from 'pino';
import { createLogger } from '../../src/lib/logger.js';
import { freePort } from '../fixtures/sse-frames.js';
import { createTestEnv, type DbMode, type TestEnv } from './test-env.js';

export { freePort };

export interface TestApp {
  env: TestEnv;
  opened: OpenedCore;
  app: App;
  url: string;
  close(): Promise<void>;
}

/**
 * The real HTTP app on the real core and database, listening on loopback. `vars` adds config variables;
 * `before` runs once the port is known (e.g. to start an identity provider that must know our URL).
 * `logger` gives the app a logger (e.g. one writing to a buffer, see captureLogs); default: none.
 */
export async function startTestApp(
  options: {
    vars?: Record<string, string> | ((url: string) => Promise<Record<string, string>> | Record<string, string>);
    clock?: Clock;
    logger?: PinoLogger;
    env?: TestEnv;
    /** The database mode of a new installation (default: the project's, DB_MODE). */
    mode?: DbMode;
    /** The core's own logger (default: silent) and its supervision of runtimes, as serve has (the benchmarks). */
    coreLogger?: Logger;
    supervise?: boolean;
  } = {},
): Promise<TestApp> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const extra = typeof options.vars === 'function' ? await options.vars(url) : options.vars ?? {};
  const vars = { AGENTWS_PUBLIC_URL: url, AGENTWS_PORT: String(port), ...extra };
  // An existing installation (a restored backup): the app on its data dir and database.
  if (options.env) options.env.writeConfig(vars);
  const env = options.env ?? (await createTestEnv({ vars, mode: options.mode, migrated: true }));
  const config = env.config();
  const opened = await openCore(config, options.coreLogger ?? silentLogger, { clock: options.clock, supervise: options.supervise }).catch((err) => {
    if (!options.env) env.keep();
    throw err;
  });
  await opened.core.migrator.up();
  const app = await buildApp(opened.core, config, { logger: options.logger });
  await app.listen({ host: '127.0.0.1', port });
  return {
    env,
    opened,
    app,
    url,
    async close() {
      // Connections still open half a second into the close end with it (as when serve's process ends)
      // instead of being waited for: after a runtime's turn the test's own fetch client (undici) holds a
      // connection it never sent a request on, which the server counts as busy, not idle (those fastify
      // closes itself), and close() waited ~3.9 s for undici's 4 s keep-alive to drop it.
      const closing = app.close();
      const cut = setTimeout(() => app.server.closeAllConnections(), 500);
      await closing.finally(() => clearTimeout(cut));
      await opened.close();
      await env.cleanup();
    },
  };
}

/** Seeds a tenant with an owner, plus extra users with the given roles; returns their ids. */
export async function seedTenant(t: TestApp, slug: string, extra: Array<{ handle: string; roles: string[] }> = [], externalId?: string) {
  const { core, db } = t.opened;
  const r = await core.tenants.seedTenant(systemCtx(silentLogger), { name: slug, slug, ownerEmail: `owner@${slug}.example`, externalTenantId: externalId });
  const ids: Record<string, string> = { owner: r.owner.id };
  for (const u of extra) {
    const { rows } = await db.query<{ id: string }>(`insert into users (tenant_id, handle, email, display_name) values ($1, $2, $3, $2) returning id`, [r.tenant.id, u.handle, `${u.handle}@${slug}.example`]);
    ids[u.handle] = rows[0].id;
    for (const role of u.roles) {
      await db.query(`insert into user_roles (tenant_id, user_id, role_id, assigned_by) select $1, $2, id, 'test' from roles where tenant_id = $1 and name = $3`, [r.tenant.id, rows[0].id, role]);
    }
  }
  return { tenantId: r.tenant.id, ids };
}

/**
 * Signs a JWT the way the service does (HS256 with the env's secret), with overridable claims and
 * header: for tokens of seeded users, and for crafting bad ones (wrong audience, expired, ...).
 */
export async function signToken(
  t: TestApp,
  claims: { sub: string; tid: string; roles: string[]; typ?: string; aud?: string; iss?: string; expS?: number; iatS?: number; sid?: string; authTimeS?: number },
  secret?: string,
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ tid: claims.tid, roles: claims.roles, typ: claims.typ ?? 'access', ...(claims.sid ? { sid: claims.sid } : {}), ...(claims.authTimeS ? { auth_time: claims.authTimeS } : {}) })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(claims.sub)
    .setIssuer(claims.iss ?? t.url)
    .setAudience(claims.aud ?? 'agentws')
    .setIssuedAt(claims.iatS ?? now)
    .setExpirationTime(claims.expS ?? now + 900)
    .setJti(crypto.randomUUID())
    .sign(new TextEncoder().encode(secret ?? t.env.vars.AGENTWS_JWT_SECRET));
}

/** fetch against the app with a bearer token and JSON body. */
export async function api(t: TestApp, method: string, path: string, options: { token?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  const res = await fetch(`${t.url}${path}`, {
    method,
    redirect: 'manual',
    headers: {
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
      ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...options.headers,
    },
    body: options.body !== undefined ? JSON.stringify(options.body) : undefined,
  });
  const text = await res.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON
  }
  return { status: res.status, headers: res.headers, json, text };
}

/**
 * A recorded sign-in of a seeded user, as the browser callback makes one (without the identity provider):
 * its row in auth_sign_ins and an access and a refresh token carrying its `sid` and `auth_time`.
 */
export async function signInAs(t: TestApp, user: { sub: string; tid: string; roles: string[] }, options: { authTimeS?: number } = {}) {
  const authTimeS = options.authTimeS ?? Math.floor(Date.now() / 1000);
  const { rows } = await t.opened.db.query<{ id: string }>(
    `insert into auth_sign_ins (tenant_id, user_id, auth_time, expires_at) values ($1, $2, to_timestamp($3), to_timestamp($3 + 604800)) returning id`,
    [user.tid, user.sub, authTimeS],
  );
  const sid = rows[0].id;
  const claims = { ...user, sid, authTimeS };
  return {
    sid,
    access: await signToken(t, { ...claims, iatS: authTimeS, expS: authTimeS + 900 }),
    refresh: await signToken(t, { ...claims, typ: 'refresh', iatS: authTimeS, expS: authTimeS + 604800 }),
  };
}

/** A JSON logger (the service's own, redaction included) whose lines are kept in `lines` for assertions. */
export function captureLogs(level = 'info'): { logger: PinoLogger; lines: Array<Record<string, any>>; text(): string } {
  const lines: Array<Record<string, any>> = [];
  const stream = { write: (s: string) => void lines.push(JSON.parse(s)) };
  return { logger: createLogger(level, stream), lines, text: () => lines.map((l) => JSON.stringify(l)).join('\n') };
}
