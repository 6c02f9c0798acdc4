import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/open-database.js';
import { createSecretBox } from '../../src/lib/secret-box.js';
import { HAS_SCRIPT, runCli, runCommand, runInTerminal } from '../helpers/cli.js';
import { createTestEnv, DB_MODE, type TestEnv } from '../helpers/test-env.js';

const KEY = 'sk-test-0123456789abcdefSECRET';
const ROTATED = 'sk-test-rotated-XYZ987';
const FLAG_KEY = 'sk-flag-key-visible-in-history';

/** Runs one query on the env's database, on a connection of its own (embedded: through the suite's host). */
async function sql<T extends Record<string, unknown>>(env: TestEnv, text: string, params: unknown[] = []): Promise<T[]> {
  const db = await openDatabase(env.config());
  try {
    return (await db.query<T>(text, params)).rows;
  } finally {
    await db.close();
  }
}

// Commands against the embedded database reach it through the socket of the process that hosts it, as
// they would with `aws serve` running; the suite hosts it itself (a command that hosts PGlite for its own
// lifetime costs seconds, and the self-hosting path is covered by cli.both.test.ts).
const SLOW = { timeout: 180_000 };

describe(`provider and runtime commands (${DB_MODE})`, SLOW, () => {
  let env: TestEnv;
  let host: Awaited<ReturnType<typeof openDatabase>> | undefined;
  const run = (args: string[], input?: string) => runCommand([...args, '--tenant', 'acme'], { env, input });
  beforeAll(async () => {
    env = await createTestEnv();
    if (DB_MODE === 'embedded') host = await openDatabase(env.config());
    expect((await runCommand(['migrate'], { env })).code).toBe(0);
    for (const [name, email] of [['acme', 'alice@acme.example'], ['beta', 'bob@beta.example']]) {
      expect((await runCommand(['tenant', 'seed', '--name', name, '--owner-email', email], { env })).code).toBe(0);
    }
  });
  afterAll(async () => {
    await host?.close();
    await env?.cleanup();
  });

  it('runtime status before anything is applied: exit 0, not ready, obvious in human output', async () => {
    const json = await run(['runtime', 'status', '--json']);
    expect(json.code, json.stderr).toBe(0);
    const s = JSON.parse(json.stdout);
    expect(s).toMatchObject({ ready: false, defaultModel: null, applied: null, pendingChanges: true, runtime: { sandbox: 'on', running: 0 }, providers: [] });
    expect(s.detail).toMatch(/no runtime configuration has been applied/);

    const human = await run(['runtime', 'status']);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^NOT READY: /);
    expect(human.stdout).toMatch(/runtime apply --default-model/);
  });

  it('provider add reads the key from stdin and stores it sealed, never in the clear', async () => {
    // A subprocess with a real pipe on stdin (the other piped secrets run in-process: test/helpers/cli.ts).
    const r = await runCli(['provider', 'add', 'openai', '--kind', 'openai', '--model', 'gpt-4.1-mini:1047576:32768:0.4:1.6', '--model', 'gpt-4.1', '--api-key-stdin', '--json', '--tenant', 'acme'], { env, input: `${KEY}\n` });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toMatch(/Warning/);
    expect(r.stdout + r.stderr).not.toContain(KEY);
    expect(JSON.parse(r.stdout).provider).toMatchObject({
      name: 'openai',
      kind: 'openai',
      baseUrl: null,
      enabled: true,
      hasApiKey: true,
      models: [{ id: 'gpt-4.1-mini', contextLimit: 1047576, outputLimit: 32768, inputCostPerMTok: 0.4, outputCostPerMTok: 1.6 }, { id: 'gpt-4.1' }],
    });

    const [row] = await sql<{ sealed: string }>(
      env,
      `select p.api_key_sealed as sealed from providers p join tenants t on t.id = p.tenant_id where t.slug = 'acme' and p.name = 'openai'`,
    );
    expect(row.sealed.startsWith('v1.')).toBe(true);
    expect(row.sealed).not.toContain(KEY);
    // Sealed without the newline `echo` would add.
    expect(createSecretBox([env.vars.AGENTWS_ENCRYPTION_KEY]).open(row.sealed)).toBe(KEY);
    const audit = await sql<{ n: number }>(env, `select count(*)::int as n from audit_log where details::text like $1`, [`%${KEY}%`]);
    expect(audit[0].n).toBe(0);
  });

  it('provider list: a table, and --json with the providers but never a key', async () => {
    const json = await run(['provider', 'list', '--json']);
    expect(json.code, json.stderr).toBe(0);
    expect(json.stdout).not.toContain(KEY);
    const doc = JSON.parse(json.stdout);
    expect(Object.keys(doc)).toEqual(['providers']);
    expect(doc.providers).toHaveLength(1);
    expect(Object.keys(doc.providers[0]).sort()).toEqual(['baseUrl', 'createdAt', 'enabled', 'hasApiKey', 'kind', 'models', 'name', 'prices', 'updatedAt']);
    expect(doc.providers[0]).toMatchObject({ name: 'openai', hasApiKey: true, enabled: true });

    const human = await run(['provider', 'list']);
    expect(human.code).toBe(0);
    expect(human.stdout.split('\n')[0]).toMatch(/^NAME\s+KIND\s+BASEURL\s+MODELS\s+ENABLED\s+KEY$/);
    expect(human.stdout).toMatch(/^openai\s+openai\s+\(default\)\s+gpt-4\.1-mini,gpt-4\.1\s+yes\s+set$/m);

    // Another tenant sees none of them.
    const beta = await runCommand(['provider', 'list', '--tenant', 'beta', '--json'], { env });
    expect(JSON.parse(beta.stdout)).toEqual({ providers: [] });
  });

  it('--api-key works but warns on stderr that it may land in shell history', async () => {
    const r = await run(['provider', 'add', 'local', '--kind', 'openai-compatible', '--base-url', 'http://127.0.0.1:9/v1/', '--model', 'llama3.1:8b', '--api-key', FLAG_KEY, '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/Warning: --api-key may be recorded in your shell history/);
    expect(r.stderr).toMatch(/--api-key-stdin/);
    // The warning is on stderr only: stdout stays one JSON document.
    expect(JSON.parse(r.stdout).provider).toMatchObject({ name: 'local', baseUrl: 'http://127.0.0.1:9/v1', models: [{ id: 'llama3.1:8b' }], hasApiKey: true });
  });

  it('without a terminal, a kind that needs a key and gets none fails with exit 1 and says how to pass it', async () => {
    const r = await run(['provider', 'add', 'claude', '--kind', 'anthropic', '--model', 'claude-sonnet-4-5']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/an anthropic provider needs an API key, and there is no terminal to ask for it/);
    expect(r.stderr).toMatch(/Hint: .*printf %s "\$KEY" \| npx aws provider add claude .*--api-key-stdin/);

    const empty = await run(['provider', 'add', 'claude', '--kind', 'anthropic', '--model', 'claude-sonnet-4-5', '--api-key-stdin', '--json'], '\n');
    expect(empty.code).toBe(1);
    expect(JSON.parse(empty.stdout)).toMatchObject({ error: 'validation_failed', message: expect.stringMatching(/stdin was empty/) });

    // An openai-compatible server may do without a key: nothing is asked, nothing fails.
    const keyless = await run(['provider', 'add', 'keyless', '--kind', 'openai-compatible', '--base-url', 'http://127.0.0.1:9/v1', '--model', 'm', '--json']);
    expect(keyless.code, keyless.stderr).toBe(0);
    expect(JSON.parse(keyless.stdout).provider.hasApiKey).toBe(false);

    const names = (await sql<{ name: string }>(env, `select name from providers order by name`)).map((p) => p.name);
    expect(names).toEqual(['keyless', 'local', 'openai']);
  });

  it('rejects bad input before asking for anything: duplicate names (conflict), bad names, bad model specs', async () => {
    const dup = await run(['provider', 'add', 'openai', '--kind', 'openai', '--model', 'x', '--api-key-stdin', '--json'], 'sk-other');
    expect(dup.code).toBe(1);
    expect(JSON.parse(dup.stdout)).toMatchObject({ error: 'conflict', message: 'provider "openai" already exists' });
    const [row] = await sql<{ sealed: string }>(env, `select api_key_sealed as sealed from providers where name = 'openai'`);
    expect(createSecretBox([env.vars.AGENTWS_ENCRYPTION_KEY]).open(row.sealed)).toBe(KEY);

    const badName = await run(['provider', 'add', 'Open_AI', '--kind', 'openai', '--model', 'x']);
    expect(badName.code).toBe(1);
    expect(badName.stderr).toMatch(/provider name "Open_AI": use lower-case letters/);

    const badModel = await run(['provider', 'add', 'other', '--kind', 'openai', '--model', 'x:12.5', '--api-key-stdin'], 'k');
    expect(badModel.code).toBe(1);
    expect(badModel.stderr).toMatch(/context limit must be a whole number/);

    const badKind = await run(['provider', 'add', 'other', '--kind', 'gemini', '--model', 'x']);
    expect(badKind.code).toBe(1);
    expect(badKind.stderr).toMatch(/openai-compatible/);
  });

  it('provider update rotates the key from stdin and enables/disables', async () => {
    const r = await run(['provider', 'update', 'openai', '--api-key-stdin', '--json'], ROTATED);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ provider: { name: 'openai', hasApiKey: true }, changed: ['apiKey (rotated)'] });
    const [row] = await sql<{ sealed: string }>(env, `select api_key_sealed as sealed from providers where name = 'openai'`);
    expect(row.sealed).not.toContain(ROTATED);
    expect(createSecretBox([env.vars.AGENTWS_ENCRYPTION_KEY]).open(row.sealed)).toBe(ROTATED);

    const nothing = await run(['provider', 'update', 'openai']);
    expect(nothing.code).toBe(1);
    expect(nothing.stderr).toMatch(/nothing to change/);

    const off = await run(['provider', 'update', 'keyless', '--disable', '--json']);
    expect(JSON.parse(off.stdout).provider.enabled).toBe(false);
    const missing = await run(['provider', 'update', 'nope', '--enable']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/provider "nope" not found/);
  });

  it('provider remove proceeds without a terminal (no prompt); a second remove is not found', async () => {
    const r = await run(['provider', 'remove', 'keyless', '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ removed: 'keyless' });
    const again = await run(['provider', 'remove', 'keyless']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/provider "keyless" not found/);
    const list = JSON.parse((await run(['provider', 'list', '--json'])).stdout);
    expect(list.providers.map((p: { name: string }) => p.name)).toEqual(['local', 'openai']);
  });

  it('runtime apply with no runtime running records the configuration (each runtime takes it when it starts); status is then ready', async () => {
    const bad = await run(['runtime', 'apply', '--default-model', 'openai/gpt-5']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/lists no model "gpt-5"/);

    const r = await run(['runtime', 'apply', '--default-model', 'openai/gpt-4.1-mini', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout);
    // No user's runtime runs: nothing to write now; each one is configured when it starts.
    expect(doc).toMatchObject({ applied: { defaultModel: 'openai/gpt-4.1-mini', providers: ['local', 'openai'] }, pushed: true });
    expect(doc.runtimeError).toBeUndefined();

    const s = JSON.parse((await run(['runtime', 'status', '--json'])).stdout);
    expect(s).toMatchObject({
      ready: true,
      defaultModel: 'openai/gpt-4.1-mini',
      applied: { defaultModel: 'openai/gpt-4.1-mini', providers: ['local', 'openai'], by: 'system:cli' },
      pendingChanges: false,
      runtime: { sandbox: 'on', running: 0 },
    });
    expect(s.detail).toBeUndefined();
    expect(JSON.stringify(s)).not.toContain(ROTATED);

    // Human output: what was applied, and that `aws serve` writes it when it starts the runtime.
    const human = await run(['runtime', 'apply']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stderr).toMatch(/applied default model openai\/gpt-4\.1-mini; providers: local, openai/);
    expect(human.stderr).not.toMatch(/not pushed/);
    expect((await run(['runtime', 'status'])).stdout).toMatch(/^READY: /);

    // The host as its serve reported it (runtime_hosts): capacity, what is resident and frozen, memory;
    // a report older than 90 s belongs to a serve that is gone and is not shown.
    await sql(env, `insert into runtime_hosts (hostname, host_pid, capacity, resident, frozen, paged_out, starting, busy, runtimes_memory_bytes, memory_total_bytes, memory_available_bytes, freezer)
                    values ('box-1', 4242, 54, 12, 9, 4, 1, 2, 3221225472, 25769803776, 17179869184, 'cgroup2'),
                           ('box-old', 4343, 54, 30, 0, 0, 0, 0, 0, 25769803776, 0, null)`);
    await sql(env, `update runtime_hosts set reported_at = now() - interval '10 minutes' where hostname = 'box-old'`);
    const withHost = JSON.parse((await run(['runtime', 'status', '--json'])).stdout);
    expect(withHost.runtime.hosts).toEqual([
      { hostname: 'box-1', pid: 4242, capacity: 54, resident: 12, frozen: 9, pagedOut: 4, starting: 1, busy: 2, runtimesMemoryBytes: 3221225472, memoryTotalBytes: 25769803776, memoryAvailableBytes: 17179869184, freezer: 'cgroup2', limits: null, diskTotalBytes: null, diskFreeBytes: null, reportedAt: expect.any(String) },
    ]);
    expect(withHost.runtime.max).toBe(54);
    expect((await run(['runtime', 'status'])).stdout).toMatch(/box-1 \(serve pid 4242\): 12 of 54 resident \(9 frozen, 4 of them paged out, 1 starting, 2 with a turn\), 3\.0 GB held by runtimes, 16\.0 GB of 24\.0 GB available; idle runtimes frozen \(cgroup2\)/);

    // Which limits hold there, and why not the others; who is near one (runtime_usage), the
    // workspace's people only.
    const limits = {
      memory: 'cgroup1', memoryMaxBytes: 4294967296, processes: 'cgroup1', processesMax: 1024, cpu: null, tmpBytes: 1073741824, disk: 'measured',
      paging: 'cgroup1', pageOutAfterMs: 300_000, swap: { totalBytes: 50 * 1024 ** 3, freeBytes: 49 * 1024 ** 3, compressedStoredBytes: 1024 ** 3, compressedUsedBytes: 350 * 1024 ** 2 },
      unavailable: { cpu: 'cannot create a cgroup under /sys/fs/cgroup/cpu (EACCES)', disk: 'measured, not enforced by the kernel' },
    };
    await sql(env, `update runtime_hosts set limits = $1, disk_total_bytes = 270582939648, disk_free_bytes = 83751862272 where hostname = 'box-1'`, [JSON.stringify(limits)]);
    const [alice] = await sql<{ id: string; tenant_id: string }>(env, `select id, tenant_id from users where email = 'alice@acme.example'`);
    const [bob] = await sql<{ id: string; tenant_id: string }>(env, `select id, tenant_id from users where email = 'bob@beta.example'`);
    await sql(env, `insert into runtime_usage (user_id, tenant_id, host, running, memory_bytes, memory_max_bytes, pids, pids_max, disk_bytes, disk_quota_bytes, disk_measured_at)
                    values ($1, $2, 'box-1', true, 3758096384, 4294967296, 40, 1024, 12884901888, 10737418240, now()), ($3, $4, 'box-1', true, 1, 4294967296, 1, 1024, 1, 10737418240, now())`, [alice.id, alice.tenant_id, bob.id, bob.tenant_id]);
    const near = JSON.parse((await run(['runtime', 'status', '--json'])).stdout);
    expect(near.runtime.hosts[0]).toMatchObject({ limits, diskFreeBytes: 83751862272 });
    expect(near.runtime.workspaceQuotaBytes).toBe(10 * 1024 ** 3);
    expect(near.runtime.people).toEqual([
      expect.objectContaining({ handle: 'alice', running: true, memoryBytes: 3758096384, diskBytes: 12884901888, diskQuotaBytes: 10737418240, near: ['memory', 'disk'], overQuota: true }),
    ]);
    const human2 = await run(['runtime', 'status']);
    expect(human2.code, human2.stderr).toBe(0);
    const text = human2.stdout;
    expect(text).toMatch(/limits: memory 4 GiB each \(cgroup1\), 1024 processes each \(cgroup1\), \/tmp 1 GiB in memory, workspace quota measured/);
    expect(text).toMatch(/not held: cpu: cannot create a cgroup under \/sys\/fs\/cgroup\/cpu \(EACCES\)/);
    // Idle runtimes paged out there, and the host's swap with what its compressed pool holds.
    expect(text).toMatch(/idle runtimes paged out to swap after 300 s frozen \(cgroup1\)/);
    expect(text).toMatch(/swap: 49 GiB free of 50 GiB \(compressed: 1 GiB held in 350 MiB of memory\)/);
    expect(text).toMatch(/alice: memory 3\.5 GiB of 4 GiB, 40 of 1024 processes, disk 12 GiB of 10 GiB PAST THE QUOTA: new turns refused/);
    expect(text).not.toMatch(/bob/);
    await sql(env, `delete from runtime_hosts`);
    await sql(env, `delete from runtime_usage`);

    const actions = (await sql<{ action: string; actor: string }>(env, `select action, actor from audit_log where action like 'provider.%' or action like 'runtime.%' order by ts`)).map((a) => `${a.action} ${a.actor}`);
    expect(actions).toEqual([
      'provider.create system:cli',
      'provider.create system:cli',
      'provider.create system:cli',
      'provider.update system:cli',
      'provider.update system:cli',
      'provider.delete system:cli',
      'runtime.apply system:cli',
      'runtime.apply system:cli',
    ]);
  });

  it('tenant quota: shows the operator\'s default, sets the tenant\'s own (bounded by the ceiling, audited), and goes back to the default', async () => {
    const shown = JSON.parse((await run(['tenant', 'quota', '--json'])).stdout);
    expect(shown).toMatchObject({ quotaMb: null, quotaBytes: 10 * 1024 ** 3, defaultBytes: 10 * 1024 ** 3, maxBytes: 100 * 1024 ** 3, people: [] });
    const set = await run(['tenant', 'quota', '--set', '25GiB']);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stderr).toMatch(/acme: each person may take 25 GiB \(the tenant's setting; at most 100 GiB may be set\)/);
    const tooBig = await run(['tenant', 'quota', '--set', '200GiB']);
    expect(tooBig.code).toBe(1);
    expect(tooBig.stderr).toMatch(/settings\.workspace\.quotaMb: a whole number of MiB from 100 to 102400/);
    expect((await run(['tenant', 'quota', '--set', 'lots'])).stderr).toMatch(/--set "lots": not a size/);
    expect(JSON.parse((await run(['tenant', 'quota', '--json'])).stdout)).toMatchObject({ quotaMb: 25600, quotaBytes: 25 * 1024 ** 3 });
    const back = JSON.parse((await run(['tenant', 'quota', '--default', '--json'])).stdout);
    expect(back).toMatchObject({ quotaMb: null, quotaBytes: 10 * 1024 ** 3 });
    const audit = await sql<{ details: { settings: { workspace?: { quotaMb: number | null } } } }>(env, `select details from audit_log where action = 'tenant.update' order by ts`);
    expect(audit.map((a) => a.details.settings.workspace?.quotaMb)).toEqual([25600, null]);
  });

  it('removing the default model\'s provider makes status not ready (exit 0 still)', async () => {
    expect((await run(['provider', 'remove', 'openai', '--yes'])).code).toBe(0);
    const s = await run(['runtime', 'status', '--json']);
    expect(s.code).toBe(0);
    expect(JSON.parse(s.stdout)).toMatchObject({ ready: false, detail: expect.stringMatching(/has no provider any more/) });
  });

  it('--cache-price sets prompt-cache prices on add and update (alone, only those prices change); unset ones show as charged', async () => {
    const add = await run(
      ['provider', 'add', 'claude', '--kind', 'anthropic', '--model', 'claude-sonnet-4-5:200000:64000:3:15', '--model', 'claude-haiku-4-5:::1:5', '--cache-price', 'claude-haiku-4-5=0.08:1.1', '--api-key-stdin', '--json'],
      KEY,
    );
    expect(add.code, add.stderr).toBe(0);
    const p = JSON.parse(add.stdout).provider;
    expect(p.models).toEqual([
      { id: 'claude-sonnet-4-5', contextLimit: 200000, outputLimit: 64000, inputCostPerMTok: 3, outputCostPerMTok: 15 },
      { id: 'claude-haiku-4-5', inputCostPerMTok: 1, outputCostPerMTok: 5, cacheReadCostPerMTok: 0.08, cacheWriteCostPerMTok: 1.1 },
    ]);
    // Unset cache prices follow Anthropic's rule, and the provider says what they come to.
    expect(p.prices).toEqual({
      'claude-sonnet-4-5': { inputPerMTok: 3, outputPerMTok: 15, cacheReadPerMTok: 0.3, cacheWritePerMTok: 3.75, cacheWriteLongPerMTok: 6 },
      'claude-haiku-4-5': { inputPerMTok: 1, outputPerMTok: 5, cacheReadPerMTok: 0.08, cacheWritePerMTok: 1.1, cacheWriteLongPerMTok: 2 },
    });

    // Alone, --cache-price changes those prices of the models as they are; limits, names and other prices stay.
    const upd = await run(['provider', 'update', 'claude', '--cache-price', 'claude-sonnet-4-5=:4', '--json']);
    expect(upd.code, upd.stderr).toBe(0);
    expect(JSON.parse(upd.stdout)).toMatchObject({ changed: ['models'] });
    expect(JSON.parse(upd.stdout).provider.models).toEqual([
      { id: 'claude-sonnet-4-5', contextLimit: 200000, outputLimit: 64000, inputCostPerMTok: 3, outputCostPerMTok: 15, cacheWriteCostPerMTok: 4 },
      { id: 'claude-haiku-4-5', inputCostPerMTok: 1, outputCostPerMTok: 5, cacheReadCostPerMTok: 0.08, cacheWriteCostPerMTok: 1.1 },
    ]);
    // With --model, the prices go on the new list.
    const replaced = await run(['provider', 'update', 'claude', '--model', 'claude-opus-4-1:::15:75', '--cache-price', 'claude-opus-4-1=1.5', '--json']);
    expect(JSON.parse(replaced.stdout).provider.models).toEqual([{ id: 'claude-opus-4-1', inputCostPerMTok: 15, outputCostPerMTok: 75, cacheReadCostPerMTok: 1.5 }]);

    const unknown = await run(['provider', 'update', 'claude', '--cache-price', 'gpt-4.1=0.5']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/--cache-price: the provider has no model "gpt-4\.1" \(its models: claude-opus-4-1\)/);
    const bad = await run(['provider', 'update', 'claude', '--cache-price', 'claude-opus-4-1=cheap']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/--cache-price "claude-opus-4-1=cheap": the prices must be USD per million tokens/);
    const missing = await run(['provider', 'update', 'nope', '--cache-price', 'x=1']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/provider "nope" not found/);
  });
});



// The terminal path is the same on both databases; it runs once, on the embedded one.
describe.runIf(DB_MODE === 'embedded' && HAS_SCRIPT)('provider commands in a terminal', SLOW, () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await createTestEnv();
    expect((await runCommand(['migrate'], { env })).code).toBe(0);
    expect((await runCommand(['tenant', 'seed', '--name', 'acme', '--owner-email', 'alice@acme.example'], { env })).code).toBe(0);
  });
  afterAll(() => env?.cleanup());

  it('asks for the key masked (never echoed) and confirms a removal', async () => {
    const add = await runInTerminal(env, ['provider', 'add', 'claude', '--kind', 'anthropic', '--model', 'claude-sonnet-4-5'], [[/API key for claude \(anthropic\)/, `${KEY}\r`]]);
    expect(add.code, add.out).toBe(0);
    expect(add.out).not.toContain(KEY);
    expect(add.out).toMatch(/\*{5}/);
    expect(add.out).toMatch(/API key: stored sealed/);
    const [row] = await sql<{ sealed: string }>(env, `select api_key_sealed as sealed from providers where name = 'claude'`);
    expect(createSecretBox([env.vars.AGENTWS_ENCRYPTION_KEY]).open(row.sealed)).toBe(KEY);

    const no = await runInTerminal(env, ['provider', 'remove', 'claude'], [[/Remove provider claude/, 'n\r']]);
    expect(no.code, no.out).toBe(1);
    expect(no.out).toMatch(/Nothing was removed/);
    expect(await sql(env, `select 1 from providers where name = 'claude'`)).toHaveLength(1);

    const yes = await runInTerminal(env, ['provider', 'remove', 'claude'], [[/Remove provider claude/, 'y\r']]);
    expect(yes.code, yes.out).toBe(0);
    expect(await sql(env, `select 1 from providers where name = 'claude'`)).toHaveLength(0);
  });
});
