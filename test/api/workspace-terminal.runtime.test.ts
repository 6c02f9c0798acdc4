import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { systemCtx } from '../../src/kernel/context.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { api, signInAs } from '../helpers/app.js';
import { agentTurn, applyScriptedProvider, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

/**
 * The workspace terminal: a shell in the person's own sandbox through
 * GET /v1/workspace/terminal, on real runtimes in real sandboxes (and once on a runner host).
 */
interface Term {
  status: number;
  body: string;
  ws: WebSocket | null;
  out(): string;
  type(text: string): void;
  /** Resolves with the output once it matches (or rejects after `ms`). */
  until(re: RegExp, ms?: number): Promise<string>;
  closed: Promise<{ code: number; reason: string }>;
}

function openTerminal(baseUrl: string, headers: Record<string, string>, query = ''): Promise<Term> {
  return new Promise((resolve) => {
    const url = `${baseUrl.replace(/^http/, 'ws')}/v1/workspace/terminal${query}`;
    const ws = new WebSocket(url, { headers });
    let text = '';
    let wake: Array<() => void> = [];
    let closedWith: (v: { code: number; reason: string }) => void = () => {};
    const closed = new Promise<{ code: number; reason: string }>((r) => (closedWith = r));
    const term: Term = {
      status: 101,
      body: '',
      ws,
      out: () => text,
      type: (t) => ws.send(t),
      async until(re, ms = 15_000) {
        const deadline = Date.now() + ms;
        while (!re.test(text)) {
          if (Date.now() > deadline) throw new Error(`no ${re} in the terminal's output: ${JSON.stringify(text.slice(-600))}`);
          await new Promise<void>((r) => {
            wake.push(r);
            setTimeout(r, 200);
          });
        }
        return text;
      },
      closed,
    };
    ws.on('message', (d, binary) => {
      if (binary) return;
      text += d.toString();
      const w = wake;
      wake = [];
      for (const f of w) f();
    });
    ws.on('close', (code, reason) => closedWith({ code, reason: reason.toString() }));
    ws.on('open', () => resolve(term));
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ ...term, status: res.statusCode ?? 0, body, ws: null }));
    });
    ws.on('error', () => {});
  });
}

/** `env` of a shell as NAME=value lines, without the values of the lines that are not variables. */
const envOf = (text: string, from: string, to: string) => {
  const body = text.slice(text.lastIndexOf(from) + from.length, text.lastIndexOf(to));
  return new Map(
    body
      .split(/\r?\n/)
      .map((l) => l.replace(/\r/g, ''))
      .filter((l) => /^[A-Za-z_][A-Za-z0-9_]*=/.test(l))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)] as [string, string]),
  );
};

describe('the workspace terminal', () => {
  let r: RuntimeApp;
  let people: Awaited<ReturnType<typeof seedPeople>>;
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const audits = async (action: string) =>
    (await r.t.opened.db.query<{ actor: string; userId: string; target: string; details: any }>(`select actor, user_id as "userId", target, details from audit_log where tenant_id = $1 and action = $2 order by ts`, [people.tenantId, action])).rows;

  beforeAll(async () => {
    r = await startRuntimeApp({ vars: { AGENTWS_TERMINAL_IDLE_SECONDS: '6' } });
    people = await seedPeople(r.t, 'term');
    await applyScriptedProvider(r.t, people.tokens.owner, r.llm);
    // The owner's runtime (a second person's terminal, below) starts while the first tests run.
    void r.t.opened.core.pool.prestart({ tenantId: people.tenantId, userId: people.ids.owner }).catch(() => {});
  }, 120_000);
  afterAll(async () => {
    await r?.close();
  });

  it('runs a command in the member\'s own workspace, shows nothing of the appliance, and is audited open and closed', async () => {
    // What the agent's bash tool sees, for comparison: its environment, from the same sandbox.
    const turn = await agentTurn(r, people.tokens.member, [{ toolCall: { name: 'bash', arguments: { command: 'env | sort > agent-env.txt', description: 'env' } } }, { text: 'done' }]);
    expect(turn.tools.length).toBe(1);
    const term = await openTerminal(r.t.url, bearer(people.tokens.member), '?cols=120&rows=40');
    expect(term.status, term.body).toBe(101);
    term.type('echo "hello-$((6*7))"; pwd\r');
    const out = await term.until(/hello-42\r?\n(\S+)\r?\n/);
    const pwd = /hello-42\r?\n(\S+)\r?\n/.exec(out)![1];
    expect(pwd).toBe('/workspace');
    // Its size: as opened, then as a resize message says (the pane's size in the dashboard).
    term.type('echo SIZE-$((1)) $(stty size)\r');
    expect(await term.until(/SIZE-1 40 120/)).toMatch(/SIZE-1 40 120/);
    term.ws!.send(Buffer.from(JSON.stringify({ type: 'resize', cols: 90, rows: 30 })), { binary: true });
    await new Promise((res) => setTimeout(res, 300));
    term.type('echo SIZE-$((2)) $(stty size)\r');
    await term.until(/SIZE-2 30 90/);
    // The environment: the agent's, plus only what a login shell and a terminal set.
    term.type('echo ENV-$((1))-START; env | sort; echo ENV-$((1))-END; echo AGENT-$((1))-START; cat agent-env.txt; echo AGENT-$((1))-END\r');
    const all = await term.until(/AGENT-1-END\r?\n/);
    const mine = envOf(all, 'ENV-1-START\r\n', 'ENV-1-END\r\n');
    const agents = envOf(all, 'AGENT-1-START\r\n', 'AGENT-1-END\r\n');
    expect(mine.size).toBeGreaterThan(3);
    const extra = [...mine.keys()].filter((k) => !agents.has(k));
    expect(extra.filter((k) => !['TERM', 'SHLVL', '_', 'PWD', 'OLDPWD', 'LINES', 'COLUMNS', 'MAIL', 'LOGNAME', 'USER', 'HOSTNAME', 'SHELL', 'LANG', 'OPENCODE_TERMINAL'].includes(k))).toEqual([]);
    const values = [...mine.values()].join('\n');
    for (const [name, secret] of Object.entries(r.t.env.vars)) {
      if (/SECRET|KEY|DATABASE_URL|PASSWORD/.test(name) && secret) expect(values, name).not.toContain(secret);
    }
    expect([...mine.keys()].filter((k) => k.startsWith('AGENTWS_') || k === 'DATABASE_URL')).toEqual([]);
    // The appliance's data dir and files are not in the sandbox's view.
    term.type(`ls ${r.t.env.dataDir} ${r.t.env.configPath} 2>&1 | head -3; echo LS-$((1))-DONE\r`);
    const ls = await term.until(/LS-1-DONE\r?\n/);
    expect(ls).toMatch(/No such file or directory/);
    expect(ls).not.toMatch(/pglite|runtimes|config\.env\r?\n/);
    term.ws!.close(1000);
    const closed = await term.closed;
    expect(closed.code).toBe(1000);
    await expect.poll(async () => (await audits('terminal.close')).length).toBeGreaterThan(0);
    const [opened] = await audits('terminal.open');
    expect(opened.userId).toBe(people.ids.mia);
    expect(opened.details.cwd).toBe('/workspace');
    const [close] = await audits('terminal.close');
    expect(close.target).toBe(opened.target);
    expect(close.details.reason).toBe('client');
    expect(close.details.seconds).toBeGreaterThan(0);
  }, 120_000);

  it('refuses a role without agents.terminal (403), a WebSocket from another origin and a cookie without an Origin', async () => {
    const viewer = await openTerminal(r.t.url, bearer(people.tokens.viewer));
    expect(viewer.status).toBe(403);
    expect(viewer.body).toContain('agents.terminal');
    const evil = await openTerminal(r.t.url, { cookie: `agentws_access=${people.tokens.member}`, origin: 'https://evil.example' });
    expect(evil.status).toBe(403);
    expect(JSON.parse(evil.body).error).toBe('origin_refused');
    const noOrigin = await openTerminal(r.t.url, { cookie: `agentws_access=${people.tokens.member}` });
    expect(noOrigin.status).toBe(403);
    // The dashboard's own origin with its cookie: opens.
    const own = await openTerminal(r.t.url, { cookie: `agentws_access=${people.tokens.member}`, origin: new URL(r.t.url).origin });
    expect(own.status, own.body).toBe(101);
    own.ws!.close(1000);
    await own.closed;
  }, 60_000);

  it('is each person\'s own: another member\'s terminal is in their sandbox and sees nothing of this one', async () => {
    // The owner's first (its runtime starts: a few seconds, longer than this app's idle time of 6 s may allow the other).
    const owner = await openTerminal(r.t.url, bearer(people.tokens.owner));
    const mia = await openTerminal(r.t.url, bearer(people.tokens.member));
    mia.type('echo secret > mia-was-here.txt; echo MIA-$((1))-DONE\r');
    await mia.until(/MIA-1-DONE\r?\n/);
    owner.type('ls /workspace; cat /workspace/mia-was-here.txt; echo OWNER-$((1))-DONE\r');
    const seen = await owner.until(/OWNER-1-DONE\r?\n/);
    expect(seen).toMatch(/mia-was-here\.txt: No such file or directory/);
    mia.ws!.close(1000);
    owner.ws!.close(1000);
    await Promise.all([mia.closed, owner.closed]);
  }, 60_000);

  it('closes when the role loses agents.terminal, on sign-out and after the idle time', async () => {
    const { rows } = await r.t.opened.db.query<{ id: string; permissions: any }>(`select id, permissions from roles where tenant_id = $1 and name = 'member'`, [people.tenantId]);
    const memberRole = rows[0].id;
    const agents = rows[0].permissions.agents;
    expect(agents.terminal).toBe(true);
    const term = await openTerminal(r.t.url, bearer(people.tokens.member));
    expect(term.status).toBe(101);
    term.type('echo be""fore\r');
    await term.until(/before\r?\n/);
    const off = await api(r.t, 'PATCH', `/v1/admin/roles/${memberRole}`, { token: people.tokens.owner, body: { permissions: { agents: { ...agents, terminal: false } } } });
    expect(off.status, off.text).toBe(200);
    const closed = await term.closed;
    expect(closed.code).toBe(4403);
    expect(closed.reason).toContain('permission_removed');
    expect((await openTerminal(r.t.url, bearer(people.tokens.member))).status).toBe(403);
    expect((await api(r.t, 'PATCH', `/v1/admin/roles/${memberRole}`, { token: people.tokens.owner, body: { permissions: { agents } } })).status).toBe(200);

    // Sign-out: the sign-in ends, and with it the terminal opened with its token.
    const signIn = await signInAs(r.t, { sub: people.ids.mia, tid: people.tenantId, roles: ['member'] });
    const signed = await openTerminal(r.t.url, bearer(signIn.access));
    expect(signed.status, signed.body).toBe(101);
    expect((await api(r.t, 'POST', '/v1/auth/logout', { token: signIn.access })).json.signedOut).toBe(true);
    expect((await signed.closed).code).toBe(4401);

    // Idle: no keystroke for AGENTWS_TERMINAL_IDLE_SECONDS (6 s here).
    const idle = await openTerminal(r.t.url, bearer(people.tokens.member));
    const t0 = Date.now();
    const idleClosed = await idle.closed;
    expect(idleClosed.code).toBe(4408);
    expect(Date.now() - t0).toBeGreaterThan(4000);
    await expect.poll(async () => (await audits('terminal.close')).map((a) => a.details.reason)).toEqual(expect.arrayContaining(['permission_removed', 'signed_out', 'idle']));

    // Deactivated by the identity provider (SCIM) mid-session: the terminal closes (the person's
    // sign-ins end and their runtime is stopped: whichever the terminal hears first).
    const scimToken = (await r.t.opened.core.scim.createToken(systemCtx(silentLogger, { tenantId: people.tenantId }), { name: 'idp' })).token;
    const last = await openTerminal(r.t.url, bearer(people.tokens.member));
    expect(last.status).toBe(101);
    const deactivated = await api(r.t, 'PATCH', `/scim/v2/Users/${people.ids.mia}`, {
      token: scimToken,
      headers: { 'content-type': 'application/scim+json' },
      body: { schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'], Operations: [{ op: 'replace', value: { active: false } }] },
    });
    expect(deactivated.status, deactivated.text).toBe(200);
    expect([4401, 4410]).toContain((await last.closed).code);
    expect((await openTerminal(r.t.url, bearer(people.tokens.member))).status).toBe(401);
  }, 90_000);
});

describe('the workspace terminal on a runner host', () => {
  let r: RuntimeApp;
  beforeAll(async () => {
    r = await startRuntimeApp({ runner: true });
  }, 120_000);
  afterAll(async () => {
    await r?.close();
  });

  it('opens in the sandbox on the runner, its WebSocket carried over the runner channel', async () => {
    const people = await seedPeople(r.t, 'termrun');
    const term = await openTerminal(r.t.url, { authorization: `Bearer ${people.tokens.member}` });
    expect(term.status, term.body).toBe(101);
    term.type('echo "far-$((40+2))"; pwd\r');
    const out = await term.until(/far-42\r?\n(\S+)\r?\n/, 30_000);
    expect(/far-42\r?\n(\S+)\r?\n/.exec(out)![1]).toBe('/workspace');
    // The runtime on the runner is the one the terminal runs in.
    expect(r.runner!.agent.runtimes.live().some((l) => l.userId === people.ids.mia)).toBe(true);
    term.ws!.close(1000);
    expect((await term.closed).code).toBe(1000);
  }, 90_000);
});
