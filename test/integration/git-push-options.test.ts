import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pkt } from '../../src/core/connectors/git-fns.js';
import { UNKNOWN_SELF } from '../../src/core/runtime/host/runtime-host.js';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { createGitServer } from '../fixtures/git-server.js';
import { api, startTestApp, type TestApp } from '../helpers/app.js';
import { seedPeople } from '../helpers/runtime.js';
import { DB_MODE } from '../helpers/test-env.js';

const run = promisify(execFile);

/**
 * Push options through the git gateway: `git push -o <option>` carries instructions to the host
 * (GitLab's merge_request.*, ci.skip, ci.variable). A real git client pushes through the real gateway (the
 * runtime's egress proxy listener, as a sandbox's git reaches it) to a real git server that advertises push
 * options and records, from git's own receive-pack (a pre-receive hook), what each push carried. A refused
 * option never reaches the server; an allowed one does; the admin's list says which.
 * The agent-in-a-sandbox path is covered by git-gateway.runtime.test.ts. The database plays no part: PostgreSQL only.
 */
describe.runIf(DB_MODE === 'postgres')('git gateway: push options', { timeout: 120_000 }, () => {
  const TOKEN = `ghs_${Math.random().toString(36).slice(2)}`;
  const CREDENTIAL = 'agws_push-options-credential';
  let t: TestApp;
  let acme: Awaited<ReturnType<typeof seedPeople>>;
  let root: string;
  let server: ReturnType<typeof createGitServer>;
  let listener: { address: string; close(): Promise<void> };
  const seen: Array<{ method: string; path: string }> = [];
  const bare = () => join(root, 'org', 'private.git');
  const env = { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t', GIT_TERMINAL_PROMPT: '0' };
  const git = async (args: string[], cwd?: string) => (await run('git', args, { cwd, env })).stdout.trim();
  /** A git command through the gateway, as the sandbox's git config sets it up: the proxy and the runtime's credential. */
  const viaGateway = (args: string[], cwd: string) =>
    run('git', ['-c', `http.proxy=${listener.address}`, '-c', `http.extraHeader=Authorization: Bearer ${CREDENTIAL}`, ...args], { cwd, env }).then(
      (r) => ({ code: 0, out: `${r.stdout}${r.stderr}` }),
      (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: err.code ?? 1, out: `${err.stdout ?? ''}${err.stderr ?? ''}` }),
    );
  const remote = 'http://llm.agentws.internal/git/corp/org/private.git';
  const ctx = () => systemCtx(silentLogger, { tenantId: acme.tenantId });
  let work: string;
  let n = 0;
  /** A new commit on a new branch under mia's prefix, pushed with these options. */
  async function pushWith(options: string[]) {
    const branch = `agent/mia/b${++n}`;
    await git(['checkout', '-q', '-b', branch], work);
    await git(['commit', '-q', '--allow-empty', '-m', branch], work);
    const r = await viaGateway(['push', ...options.flatMap((o) => ['-o', o]), 'origin', branch], work);
    const landed = await git(['--git-dir', bare(), 'rev-parse', '--verify', '-q', `refs/heads/${branch}`]).catch(() => null);
    return { ...r, landed: Boolean(landed) };
  }

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'agentws-gitpo-'));
    await git(['init', '-q', '--bare', '-b', 'main', bare()]);
    const seed = join(root, 'seed');
    await git(['init', '-q', '-b', 'main', seed]);
    await git(['commit', '-q', '--allow-empty', '-m', 'initial'], seed);
    await git(['push', '-q', bare(), 'main'], seed);
    server = createGitServer({ root, authorization: `Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`, pushOptions: true, onRequest: (q) => seen.push({ method: q.method, path: q.path }) });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

    t = await startTestApp();
    acme = await seedPeople(t, 'acme-po');
    await t.opened.core.gitHosts.add(ctx(), { name: 'corp', baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token: TOKEN, access: [{ who: 'role:member', repos: ['org/*'] }] });
    listener = await t.opened.core.egress.listen({ tenantId: acme.tenantId, userId: acme.ids.mia, credential: CREDENTIAL, self: UNKNOWN_SELF }, { port: 0 });
    work = join(root, 'work');
    const cloned = await viaGateway(['clone', '-q', remote, work], root);
    expect(cloned.code, cloned.out).toBe(0);
  });

  afterAll(async () => {
    await listener?.close();
    await t?.close();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    if (root) rmSync(root, { recursive: true, force: true });
  });

  const audit = async (action: string) => (await t.opened.db.query<{ details: any }>(`select details from audit_log where tenant_id = $1 and action = $2 order by ts`, [acme.tenantId, action])).rows.map((r) => r.details);

  it('by default refuses a push carrying any push option, in git\'s words, and the server never sees it', async () => {
    // Without options, a push goes through (the server records it, with none).
    const plain = await pushWith([]);
    expect(plain.code, plain.out).toBe(0);
    expect(plain.landed).toBe(true);
    expect(server.pushes()).toEqual([{ options: [] }]);

    for (const options of [['ci.skip'], ['merge_request.create', 'merge_request.target=main'], ['ci.variable=DEPLOY_TOKEN=x']]) {
      const before = server.pushes().length;
      const r = await pushWith(options);
      expect(r.code, r.out).not.toBe(0);
      expect(r.out).toMatch(/\[remote rejected\] .* \(push option/);
      expect(r.out).toContain('remote: agentws:');
      expect(r.out).toContain('--push-option');
      expect(r.landed).toBe(false);
      expect(server.pushes().length).toBe(before);
    }
    // Audited beside the answer (not before it).
    await expect.poll(async () => (await audit('git.push_refused')).map((d) => d.options)).toEqual([['ci.skip'], ['merge_request.create', 'merge_request.target'], ['ci.variable']]);
    // Keys only: a value the agent chose is not written into the audit log.
    expect(JSON.stringify(await audit('git.push_refused'))).not.toContain('DEPLOY_TOKEN');
  });

  it("passes what the admin lists (a key, a prefix, key=value exactly), refuses the rest of the push with them", async () => {
    const set = await api(t, 'PATCH', '/v1/admin/connectors/git/corp', { token: acme.tokens.owner, body: { pushOptions: ['merge_request.create', 'merge_request.title', 'merge_request.label=agent'] } });
    expect(set.status, set.text).toBe(200);
    expect(set.json.pushOptions).toEqual(['merge_request.create', 'merge_request.title', 'merge_request.label=agent']);

    const allowed = await pushWith(['merge_request.create', 'merge_request.title=Fix the thing', 'merge_request.label=agent']);
    expect(allowed.code, allowed.out).toBe(0);
    expect(allowed.landed).toBe(true);
    expect(server.pushes().at(-1)).toEqual({ options: ['merge_request.create', 'merge_request.title=Fix the thing', 'merge_request.label=agent'] });
    await expect.poll(async () => (await audit('git.push')).at(-1)).toMatchObject({ options: ['merge_request.create', 'merge_request.title', 'merge_request.label'], as: 'service' });

    // One option off the list refuses the whole push: the allowed ones do not reach the host either.
    const before = server.pushes().length;
    for (const options of [['merge_request.create', 'merge_request.merge_when_pipeline_succeeds'], ['merge_request.label=deploy'], ['MERGE_REQUEST.CREATE']]) {
      const r = await pushWith(options);
      expect(r.code, `${options}: ${r.out}`).not.toBe(0);
      expect(r.landed).toBe(false);
    }
    expect(server.pushes().length).toBe(before);

    // A prefix covers every key under it.
    await api(t, 'PATCH', '/v1/admin/connectors/git/corp', { token: acme.tokens.owner, body: { pushOptions: ['merge_request.*'] } });
    const prefixed = await pushWith(['merge_request.create', 'merge_request.merge_when_pipeline_succeeds']);
    expect(prefixed.code, prefixed.out).toBe(0);
    expect(server.pushes().at(-1)).toEqual({ options: ['merge_request.create', 'merge_request.merge_when_pipeline_succeeds'] });
    const ci = await pushWith(['ci.skip']);
    expect(ci.code).not.toBe(0);
    expect(server.pushes().length).toBe(before + 1);
  });

  it('refuses options hidden from a naive reading: capabilities on a later command line, with a value, after a tab', async () => {
    await api(t, 'PATCH', '/v1/admin/connectors/git/corp', { token: acme.tokens.owner, body: { pushOptions: [] } });
    // Deletions of branches that landed above: a push without a pack, so git's receive-pack runs its hooks
    // with whatever options it read. Hand-made (git's client never sends these): the gateway must read the
    // capability lists as receive-pack does, or the options after them would reach the host unread.
    const id = (branch: string) => git(['--git-dir', bare(), 'rev-parse', `refs/heads/${branch}`]);
    const [b1, b5, b9] = await Promise.all(['agent/mia/b1', 'agent/mia/b5', 'agent/mia/b9'].map(id));
    const zero = '0'.repeat(40);
    const F = Buffer.from('0000');
    const bodies = [
      Buffer.concat([pkt(`${b1} ${zero} refs/heads/agent/mia/b1\0report-status\n`), pkt(`${b5} ${zero} refs/heads/agent/mia/b5\0push-options\n`), F, pkt('ci.skip'), F]),
      Buffer.concat([pkt(`${b9} ${zero} refs/heads/agent/mia/b9\0report-status push-options=1\n`), F, pkt('ci.skip'), F]),
      Buffer.concat([pkt(`${b9} ${zero} refs/heads/agent/mia/b9\0report-status\tpush-options\n`), F, pkt('ci.skip'), F]),
    ];
    const pushes = server.pushes().length;
    const before = seen.filter((s) => s.path.endsWith('/git-receive-pack')).length;
    for (const body of bodies) {
      const answer = await rawPush(body);
      expect(answer.status).toBe(200);
      expect(answer.text).toMatch(/ng refs\/heads\/agent\/mia\/b\d push option "ci\.skip" not allowed/);
    }
    expect(seen.filter((s) => s.path.endsWith('/git-receive-pack')).length).toBe(before);
    expect(server.pushes().length).toBe(pushes);
    expect(await Promise.all(['agent/mia/b1', 'agent/mia/b5', 'agent/mia/b9'].map(id))).toEqual([b1, b5, b9]);
  });

  it('checks the admin\'s list, naming the field', async () => {
    for (const bad of [['*'], ['ci skip'], ['merge_request.*=x'], ['=x'], Array.from({ length: 51 }, (_, i) => `o${i}`)]) {
      const r = await api(t, 'PATCH', '/v1/admin/connectors/git/corp', { token: acme.tokens.owner, body: { pushOptions: bad } });
      expect(r.status, JSON.stringify(bad)).toBe(400);
      expect(r.text).toMatch(/pushOptions/);
    }
  });

  /** A receive-pack request as a hostile client would send it through the proxy listener. */
  async function rawPush(body: Buffer): Promise<{ status: number; text: string }> {
    const u = new URL(listener.address);
    const { request } = await import('node:http');
    return new Promise((resolve, reject) => {
      const req = request(
        { host: u.hostname, port: u.port, method: 'POST', path: `${remote}/git-receive-pack`, headers: { authorization: `Bearer ${CREDENTIAL}`, 'content-type': 'application/x-git-receive-pack-request', 'content-length': body.length } },
        (res: http.IncomingMessage) => {
          let text = '';
          res.setEncoding('latin1');
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }
});
