import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/database.js';
import { openDatabase } from '../../src/db/open-database.js';
import { runCommand } from '../helpers/cli.js';
import { createTestEnv, DB_MODE, type TestEnv } from '../helpers/test-env.js';

// Commands against the embedded database reach it through the socket of the process hosting it (here the
// suite, as `aws serve` would), as in runtime-cli.both.test.ts.
const SLOW = { timeout: 180_000 };

/**
 * The runner commands run in-process (the built CLI): tokens (shown once, listed without themselves,
 * revoked), and runners listed, drained, resumed and removed. A runner is registered by writing its row,
 * as the control plane does when `aws runner` connects (the channel is tested in runner-remote.runtime.test.ts).
 */
describe(`runner commands (${DB_MODE})`, SLOW, () => {
  let env: TestEnv;
  let db: Database;
  let token = '';
  let tokenId = '';
  const run = (args: string[]) => runCommand(args, { env });

  beforeAll(async () => {
    env = await createTestEnv();
    db = await openDatabase(env.config());
    expect((await run(['migrate'])).code).toBe(0);
  });
  afterAll(async () => {
    await db?.close();
    await env?.cleanup();
  });

  it('runner probe takes the runner\'s own settings: a missing control URL or a control-plane secret is named, and nothing runs', async () => {
    const none = await runCommand(['runner', 'probe'], { extraEnv: { AGENTWS_RUNNER_TOKEN: `agwr_${'a'.repeat(43)}` } });
    expect(none.code).not.toBe(0);
    expect(none.stderr).toMatch(/AGENTWS_CONTROL_URL/);
    expect(none.stdout).not.toMatch(/contained|probes passed/);
    const secret = await runCommand(['runner', 'probe'], { extraEnv: { AGENTWS_CONTROL_URL: 'http://127.0.0.1:9', AGENTWS_RUNNER_TOKEN: `agwr_${'a'.repeat(43)}`, AGENTWS_JWT_SECRET: 'x'.repeat(40) } });
    expect(secret.code).not.toBe(0);
    expect(secret.stderr).toMatch(/AGENTWS_JWT_SECRET/);
  });

  it('token create prints the token once (stdout: the token alone) and says it will not be shown again', async () => {
    const json = await run(['runner', 'token', 'create', 'r1', '--json']);
    expect(json.code, json.stderr).toBe(0);
    const created = JSON.parse(json.stdout);
    expect(created).toEqual({ id: expect.any(String), name: 'r1', token: expect.stringMatching(/^agwr_[A-Za-z0-9_-]{43}$/), maxCapacity: 100, createdAt: expect.any(String) });
    token = created.token;
    tokenId = created.id;

    const human = await run(['runner', 'token', 'create', 'r2', '--max-capacity', '6']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^agwr_[A-Za-z0-9_-]{43}\n$/);
    expect(human.stderr).toMatch(/runner token "r2" created .*counted up to 6 runtimes/);
    expect(human.stderr).toMatch(/not shown again/);

    const dup = await run(['runner', 'token', 'create', 'r1']);
    expect(dup.code).toBe(1);
    expect(dup.stderr).toMatch(/a runner token named "r1" exists/);
    const bad = await run(['runner', 'token', 'create', 'r3', '--max-capacity', '-2']);
    expect(bad.code).not.toBe(0);
    const { rows } = await db.query(`select count(*)::int as n from audit_log where action = 'runner.token_created' and actor = 'system:cli'`);
    expect(rows[0].n).toBe(2);
  });

  it('token list shows names, last use and revocation, never a token or its hash', async () => {
    const json = await run(['runner', 'token', 'list', '--json']);
    expect(json.code, json.stderr).toBe(0);
    const { tokens } = JSON.parse(json.stdout);
    expect(tokens.map((t: { name: string }) => t.name)).toEqual(['r1', 'r2']);
    expect(tokens[0]).toMatchObject({ id: tokenId, name: 'r1', maxCapacity: 100, lastUsedAt: null, revokedAt: null, revoked: false, runners: [] });
    expect(tokens[1]).toMatchObject({ name: 'r2', maxCapacity: 6 });
    const human = await run(['runner', 'token', 'list']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^ID\s+NAME\s+MAX CAPACITY\s+CREATED\s+LAST USED\s+REVOKED\s+RUNNERS\n/);
    expect(human.stdout).toMatch(/r1\s+100\s+\S+\s+never\s+-\s+-/);
    const { rows } = await db.query<{ h: string }>(`select token_hash as h from runner_tokens where id = $1`, [tokenId]);
    for (const out of [json.stdout, human.stdout]) {
      expect(out).not.toContain(token);
      expect(out).not.toContain(rows[0].h);
    }
  });

  it('runner list, drain, resume: states, figures and heartbeat age; unknown runner: exit 1', async () => {
    const empty = await run(['runner', 'list']);
    expect(empty.code, empty.stderr).toBe(0);
    expect(empty.stderr).toMatch(/No runners/);
    await db.query(
      `insert into runners (name, token_id, kind, address, labels, version, capacity, resident, busy, state, serve_id, connected_at, heartbeat_at)
       values ('r1', $1, 'remote', '10.0.0.9', '{"zone":"a"}', '0.1.0', 4, 1, 1, 'active', 'serve-1', now(), now() - interval '3 seconds')`,
      [tokenId],
    );
    const json = await run(['runner', 'list', '--json']);
    expect(json.code, json.stderr).toBe(0);
    const { runners } = JSON.parse(json.stdout);
    expect(runners).toEqual([
      expect.objectContaining({ name: 'r1', kind: 'remote', state: 'active', healthy: true, capacity: 4, maxCapacity: 100, resident: 1, busy: 1, users: 0, version: '0.1.0', labels: { zone: 'a' }, address: '10.0.0.9', sharedStorage: false }),
    ]);
    expect(runners[0].heartbeat).toMatch(/^\ds ago$/);
    const human = await run(['runner', 'list']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^NAME\s+KIND\s+STATE\s+CAPACITY\s+RESIDENT\s+BUSY\s+USERS\s+HEARTBEAT\s+VERSION\s+LABELS\n/);
    expect(human.stdout).toMatch(/r1\s+remote\s+active\s+4\s+1\s+1\s+0\s+\ds ago\s+0\.1\.0\s+zone=a/);

    const drain = await run(['runner', 'drain', 'r1']);
    expect(drain.code, drain.stderr).toBe(0);
    expect(drain.stderr).toMatch(/runner "r1" is draining: 0 users to move/);
    expect(JSON.parse((await run(['runner', 'list', '--json'])).stdout).runners[0].state).toBe('draining');
    const { rows } = await db.query(`select actor from audit_log where action = 'runner.drain'`);
    expect(rows).toEqual([{ actor: 'system:cli' }]);

    const resume = await run(['runner', 'resume', 'r1', '--json']);
    expect(resume.code, resume.stderr).toBe(0);
    expect(JSON.parse(resume.stdout)).toMatchObject({ name: 'r1', state: 'active' });

    const nope = await run(['runner', 'drain', 'nope', '--json']);
    expect(nope.code).toBe(1);
    expect(JSON.parse(nope.stdout)).toMatchObject({ error: 'not_found', message: 'runner "nope" not found' });
    // A connected runner is not removed.
    const busy = await run(['runner', 'remove', 'r1']);
    expect(busy.code).toBe(1);
    expect(busy.stderr).toMatch(/drain it/i);
  });

  it('token update changes the ceiling (audited); a runner reporting more is listed at it, with what it reports', async () => {
    await db.query(`update runners set reported_capacity = 500, capacity = 100 where name = 'r1'`);
    const up = await run(['runner', 'token', 'update', 'r1', '--max-capacity', '3', '--json']);
    expect(up.code, up.stderr).toBe(0);
    expect(JSON.parse(up.stdout)).toMatchObject({ name: 'r1', maxCapacity: 3, previous: 100, runners: ['r1'] });
    const human = await run(['runner', 'list']);
    expect(human.stdout).toMatch(/r1\s+remote\s+active\s+3 \(reports 500\)/);
    const { rows } = await db.query(`select details from audit_log where action = 'runner.token_updated' and actor = 'system:cli'`);
    expect(rows).toEqual([{ details: expect.objectContaining({ name: 'r1', maxCapacity: 3, previous: 100 }) }]);
    const nope = await run(['runner', 'token', 'update', 'nope', '--max-capacity', '3']);
    expect(nope.code).toBe(1);
    expect(nope.stderr).toMatch(/runner token "nope" not found/);
    const missing = await run(['runner', 'token', 'update', 'r1']);
    expect(missing.code).not.toBe(0);
  });

  it('token revoke puts its runners offline and refuses the token; the runner can then be removed', async () => {
    const r = await run(['runner', 'token', 'revoke', 'r1']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/revoked runner token "r1" .*offline now: r1/);
    const list = JSON.parse((await run(['runner', 'list', '--json'])).stdout).runners;
    expect(list[0]).toMatchObject({ name: 'r1', state: 'offline', healthy: false });
    const again = await run(['runner', 'token', 'revoke', tokenId, '--json']);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ id: tokenId, name: 'r1', already: true });
    const tokens = JSON.parse((await run(['runner', 'token', 'list', '--json'])).stdout).tokens;
    expect(tokens.find((t: { id: string }) => t.id === tokenId)).toMatchObject({ revoked: true, revokedAt: expect.any(String), runners: ['r1'] });

    const removed = await run(['runner', 'remove', 'r1', '--json']);
    expect(removed.code, removed.stderr).toBe(0);
    expect(JSON.parse(removed.stdout)).toEqual({ name: 'r1', removed: true, users: 0 });
    expect(JSON.parse((await run(['runner', 'list', '--json'])).stdout).runners).toEqual([]);
  });
});
