import { execFile, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fixtures/fake-llm.js';

/**
 * The appliance's container image: built from Debian's packages by templates/container/build.sh,
 * it starts, answers /readyz with the agents' sandbox on, passes `aws runtime probe` inside, and runs a
 * turn against the scripted model on the host; compose.yaml brings it up with PostgreSQL (pgvector) and
 * does the same. Run with `npm run test:image` (builds first); root and podman needed.
 */
const run = promisify(execFile);
const IMAGE = process.env.AGENTWS_IMAGE ?? 'localhost/agentws:latest';
const WORK = process.env.AGENTWS_IMAGE_WORKDIR ?? '/var/tmp/agentws-image';
const OWNER = 'first.owner@example.com';
const TAG = `agentws-imgtest-${process.pid}`;

// build.sh writes the containers.conf this host needs (rlimits, runc) for podman and podman-compose.
const podmanEnv = { ...process.env } as Record<string, string>;
const envFile = `${WORK}/podman.env`;
if (existsSync(envFile)) {
  const m = /CONTAINERS_CONF=(\S+)/.exec(readFileSync(envFile, 'utf8'));
  if (m) podmanEnv.CONTAINERS_CONF = m[1].replace(/^'|'$/g, '');
}
const podman = async (...args: string[]) => (await run('podman', args, { env: podmanEnv, maxBuffer: 64 << 20 })).stdout;

/** The options compose.yaml gives the app, for `podman run`. */
const SECCOMP = fileURLToPath(new URL('../../templates/container/seccomp.json', import.meta.url));
const SECURITY = ['--userns=auto', '--security-opt', 'unmask=/proc/*', '--security-opt', `seccomp=${SECCOMP}`, '--security-opt', 'no-new-privileges', '--cap-drop=all', '--read-only', '--tmpfs', '/tmp'];

async function call(base: string, method: string, path: string, token?: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

/** Polls until fn returns a value (not undefined), or throws with the last reason. */
async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/**
 * The scripted model listens on the host's loopback; a container reaches the host at its network's
 * gateway (which exists only while a container is on that network). A forwarder on that address only
 * (not every interface) bridges the two.
 */
async function forwardTo(port: number, host: string): Promise<{ port: number; close(): void }> {
  const server = net.createServer((c) => {
    const u = net.connect(port, '127.0.0.1');
    c.pipe(u).pipe(c);
    c.on('error', () => u.destroy());
    u.on('error', () => c.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, resolve);
  });
  return { port: (server.address() as AddressInfo).port, close: () => server.close() };
}

/** The service API key of a running container (generated at its first start, in the data volume). */
async function apiKey(container: string): Promise<string> {
  const out = await podman('exec', container, 'node', '/app/bin/run.js', 'config', 'show', '--json', '--show-secrets');
  return JSON.parse(out).variables.AGENTWS_API_KEY.value;
}

/** Readiness with the sandbox on and agents able to run. */
async function readySandboxed(base: string, timeoutMs = 180_000) {
  return until(
    '/readyz with the sandbox on',
    async () => {
      const r = await call(base, 'GET', '/readyz');
      return r.status === 200 && r.json?.agents?.sandbox === 'on' && r.json?.agents?.available === true ? r.json : undefined;
    },
    timeoutMs,
  );
}

/** The gateway of the container's network: the host, as the container sees it. */
async function gatewayOf(container: string): Promise<string> {
  const nets = JSON.parse(await podman('inspect', container, '--format', '{{json .NetworkSettings.Networks}}'));
  const gw = Object.values(nets as Record<string, { Gateway: string }>)[0]?.Gateway;
  if (!gw) throw new Error(`no network gateway for ${container}`);
  return gw;
}

/** Registers the scripted model, applies it, and runs one turn; returns the assistant's text. */
async function turn(base: string, key: string, llm: FakeLlm, llmUrl: string, text: string): Promise<string> {
  const me = await call(base, 'GET', '/v1/auth/me', key);
  expect(me.status, me.text).toBe(200);
  expect(me.json.user.email).toBe(OWNER);
  const add = await call(base, 'POST', '/v1/admin/providers', key, {
    name: 'scripted',
    kind: 'openai-compatible',
    baseUrl: `${llmUrl}/v1`,
    apiKey: 'sk-scripted-secret',
    models: [{ id: 'fake-model', contextLimit: 32000, outputLimit: 4096 }],
  });
  expect(add.status, add.text).toBe(201);
  const apply = await call(base, 'POST', '/v1/admin/runtime/apply', key, { defaultModel: 'scripted/fake-model' });
  expect(apply.status, apply.text).toBe(200);
  const created = await call(base, 'POST', '/v1/sessions', key, { title: 'in the container' });
  expect(created.status, created.text).toBe(201);
  const sessionId = created.json.sessionId as string;
  llm.script([{ text, usage: { prompt: 100, completion: 20 } }]);
  const prompt = await call(base, 'POST', `/v1/sessions/${sessionId}/prompt`, key, { text: 'say hello', agent: 'build' });
  expect(prompt.status, prompt.text).toBe(202);
  return until(
    'the assistant message',
    async () => {
      const m = await call(base, 'GET', `/v1/sessions/${sessionId}/messages`, key);
      const assistant = m.json?.messages?.find((x: any) => x.info?.role === 'assistant' && x.info?.time?.completed);
      return assistant?.parts?.find((p: any) => p.type === 'text')?.text as string | undefined;
    },
    150_000,
  );
}

describe('container image', () => {
  let llm: FakeLlm;
  const forwarders: Array<{ close(): void }> = [];
  const started: string[] = [];
  /** The scripted model's URL as the container sees it. */
  const modelUrlFor = async (container: string) => {
    const gw = await gatewayOf(container);
    const f = await forwardTo(Number(new URL(llm.url).port), gw);
    forwarders.push(f);
    return `http://${gw}:${f.port}`;
  };

  beforeAll(async () => {
    await podman('image', 'exists', IMAGE).catch(() => {
      throw new Error(`${IMAGE} is not built: run \`sudo bash templates/container/build.sh\` (npm run test:image does)`);
    });
    llm = await startFakeLlm();
  });
  afterAll(async () => {
    for (const c of started) await podman('rm', '-f', '-v', c).catch(() => {});
    for (const f of forwarders) f.close();
    await llm?.close();
  });

  it('starts (embedded database), answers /readyz with the sandbox on, passes the probes, and runs a turn', async () => {
    const t0 = Date.now();
    const name = `${TAG}-solo`;
    started.push(name);
    await podman('run', '-d', '--name', name, ...SECURITY, '-e', `AGENTWS_OPERATOR_EMAIL=${OWNER}`, '-p', '127.0.0.1::8080', IMAGE);
    const port = (await podman('port', name, '8080')).trim().split(':').pop();
    const base = `http://127.0.0.1:${port}`;
    const ready = await readySandboxed(base);
    expect(ready).toMatchObject({ ready: true, database: 'ok', migrations: 'current', agents: { sandbox: 'on', available: true } });
    console.log(`container ready in ${Date.now() - t0} ms`);

    // Not root, and no capability: what compose.yaml promises.
    const status = await podman('exec', name, 'sh', '-c', 'id -u; grep CapEff /proc/1/status');
    expect(status).toMatch(/^10001\n/);
    expect(status).toMatch(/CapEff:\s+0+\n/);

    const probe = JSON.parse(await podman('exec', name, 'node', '/app/bin/run.js', 'runtime', 'probe', '--json'));
    expect(probe.results.filter((r: any) => !r.passed), JSON.stringify(probe.results.filter((r: any) => !r.passed))).toEqual([]);
    expect(probe.ok).toBe(true);

    const key = await apiKey(name);
    expect(await turn(base, key, llm, await modelUrlFor(name), 'Hello from inside the container')).toBe('Hello from inside the container');
    console.log(`image test (start, probes, turn) took ${Date.now() - t0} ms`);
  });

  it('refuses a first start without the owner\'s email (nobody else can claim the tenant)', async () => {
    const name = `${TAG}-noowner`;
    started.push(name);
    const r = await run('podman', ['run', '--name', name, ...SECURITY, IMAGE], { env: podmanEnv }).then(
      () => ({ code: 0, stderr: '' }),
      (err: any) => ({ code: err.code as number, stderr: String(err.stderr) }),
    );
    expect(r.code).toBe(64);
    expect(r.stderr).toMatch(/set AGENTWS_OPERATOR_EMAIL/);
  });

  it('refuses an unmasked /proc in the host\'s user namespace (a compose tool that dropped userns_mode)', async () => {
    const name = `${TAG}-hostns`;
    started.push(name);
    const opts = SECURITY.filter((o) => o !== '--userns=auto');
    const r = await run('podman', ['run', '--name', name, ...opts, '-e', `AGENTWS_OPERATOR_EMAIL=${OWNER}`, IMAGE], { env: podmanEnv }).then(
      () => ({ code: 0, stderr: '' }),
      (err: any) => ({ code: err.code as number, stderr: String(err.stderr) }),
    );
    expect(r.code).toBe(65);
    expect(r.stderr).toMatch(/runs in the host's user namespace/);
  });

  it('compose.yaml: the app and PostgreSQL with pgvector come up, healthy, and run a turn', async () => {
    const t0 = Date.now();
    await podman('image', 'exists', 'localhost/agentws-postgres:15').catch(() => {
      throw new Error('localhost/agentws-postgres:15 is not built: run `sudo bash templates/container/build.sh`');
    });
    const project = `${TAG}-compose`;
    const port = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    // PODMAN_USERNS: Debian bookworm's podman-compose (1.0.3) ignores userns_mode (docs/operating/containers.md).
    const env = { ...podmanEnv, PODMAN_USERNS: 'auto', AGENTWS_OPERATOR_EMAIL: OWNER, AGENTWS_DB_PASSWORD: 'composetest0123456789', AGENTWS_PUBLISH: `127.0.0.1:${port}`, AGENTWS_PUBLIC_URL: `http://localhost:${port}` };
    const compose = (...args: string[]) =>
      new Promise<string>((resolve, reject) => {
        const file = fileURLToPath(new URL('../../templates/container/compose.yaml', import.meta.url));
        const p = spawn('podman-compose', ['-p', project, '-f', file, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
        let out = '';
        p.stdout.on('data', (d) => (out += d));
        p.stderr.on('data', (d) => (out += d));
        p.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`podman-compose ${args.join(' ')}: exit ${code}\n${out}`))));
      });
    try {
      await compose('up', '-d');
      const base = `http://127.0.0.1:${port}`;
      const ready = await readySandboxed(base);
      expect(ready).toMatchObject({ ready: true, database: 'ok', agents: { sandbox: 'on', available: true } });
      const app = `${project}_app_1`;
      const cfg = JSON.parse(await podman('exec', app, 'node', '/app/bin/run.js', 'config', 'show', '--json'));
      expect(cfg.databaseMode).toBe('postgres');
      const vector = await podman('exec', '-e', `PGPASSWORD=${env.AGENTWS_DB_PASSWORD}`, `${project}_db_1`, 'psql', '-h', '/var/run/postgresql', '-U', 'agentws', '-d', 'agentws', '-tAc', "select extversion from pg_extension where extname = 'vector'");
      expect(vector.trim()).toMatch(/^0\.\d+\.\d+$/);
      const key = await apiKey(app);
      expect(await turn(base, key, llm, await modelUrlFor(app), 'Hello from compose')).toBe('Hello from compose');
      // The health check compose.yaml declares passes.
      await until('a healthy app', async () => ((await podman('healthcheck', 'run', app).then(() => true, () => false)) ? true : undefined), 60_000);
      console.log(`compose test took ${Date.now() - t0} ms`);
    } finally {
      await compose('down', '-v').catch((err) => console.error(String(err)));
      // podman-compose 1.0.3 leaves the project's network behind.
      await podman('network', 'rm', '-f', `${project}_default`).catch(() => {});
    }
  });
});
