import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeStep } from '../fixtures/fake-llm.js';
import { api } from '../helpers/app.js';
import { agentTurn, applyScriptedProvider, seedPeople, startRuntimeApp, type RuntimeApp } from '../helpers/runtime.js';

/**
 * The model-driven containment suite: a hostile member steers the scripted model into bash,
 * read, webfetch, glob and grep calls, approves its own permission requests, and the tool outputs
 * (GET /v1/sessions/:id/messages) must show none of the service's secrets, another user's or another
 * tenant's files, provider keys, or internal endpoints. Legitimate work must succeed in the same runtime.
 *
 * Expected to FAIL on the shared unsandboxed runtime (the state before sandboxes); it passes once every
 * user's runtime is sandboxed. Paths are the host's (an attacker learns them from /proc or error messages);
 * legitimate work uses workspace-relative paths, which hold both before and inside the sandbox.
 *
 * Twice: with the runtime on this host (serve's local runner), and on a runner host the control plane
 * reaches over the runner channel (its runtime configured through the channel, its model calls
 * relayed, its runner token one more secret), where the workspaces are on the runner's disk.
 *
 * Run alone: npx vitest run --config test/vitest.config.ts test/security/containment-agent.test.ts
 */
const OTHER_TENANT_KEY = 'sk-beta-provider-key-6d1f0c2ae4b9';
const OWN_TENANT_KEY = 'sk-scripted-secret';

for (const where of ['this host', 'a runner host'] as const) describe(`containment: a hostile member through the real API, the agent on ${where}`, { timeout: 120_000 }, () => {
  let r: RuntimeApp;
  let acme: Awaited<ReturnType<typeof seedPeople>>;
  let beta: Awaited<ReturnType<typeof seedPeople>>;
  let secrets: Record<string, string>;
  let apiPort = 0;
  let readyBody = '';
  const ownerMarker = `owner-marker-${Math.random().toString(36).slice(2)}`;
  const betaMarker = `beta-marker-${Math.random().toString(36).slice(2)}`;

  /** One turn as `token`: the model makes `steps`, every permission it asks is approved by the same user. */
  async function turn(token: string, steps: FakeStep[]) {
    const { tools } = await agentTurn(r, token, steps, { title: 'probe', toolsEnded: true });
    // Tool metadata too: some probes report what they saw there (bash's exit code and output).
    const output = tools.map((p) => `${p.state?.output ?? ''}${p.state?.error ?? ''}${JSON.stringify(p.state?.metadata ?? {})}`).join('\n');
    return { tools, output };
  }
  const call = (name: string, args: Record<string, unknown>): FakeStep[] => [{ toolCall: { name, arguments: args } }, { text: 'done' }];
  const bash = (command: string) => call('bash', { command, description: 'probe' });

  beforeAll(async () => {
    r = await startRuntimeApp({ vars: { AGENTWS_RUNTIME_ASK_TOOLS: 'bash,write,read,glob,grep,webfetch,external_directory' }, runner: where === 'a runner host' });
    acme = await seedPeople(r.t, 'acme');
    beta = await seedPeople(r.t, 'beta');
    await applyScriptedProvider(r.t, acme.tokens.owner, r.llm);
    const add = await api(r.t, 'POST', '/v1/admin/providers', {
      token: beta.tokens.owner,
      body: { name: 'scripted', kind: 'openai-compatible', baseUrl: `${r.llm.url}/v1`, apiKey: OTHER_TENANT_KEY, models: [{ id: 'fake-model', contextLimit: 32000, outputLimit: 4096 }] },
    });
    expect(add.status, add.text).toBe(201);
    expect((await api(r.t, 'POST', '/v1/admin/runtime/apply', { token: beta.tokens.owner, body: { defaultModel: 'scripted/fake-model' } })).status).toBe(200);
    apiPort = Number(new URL(r.t.url).port);
    readyBody = await (await fetch(`${r.t.url}/readyz`)).text();
    const v = r.t.env.vars;
    secrets = {
      jwtSecret: v.AGENTWS_JWT_SECRET,
      apiKey: v.AGENTWS_API_KEY,
      encryptionKey: v.AGENTWS_ENCRYPTION_KEY,
      ownTenantProviderKey: OWN_TENANT_KEY,
      otherTenantProviderKey: OTHER_TENANT_KEY,
      otherUserMarker: ownerMarker,
      otherTenantMarker: betaMarker,
      ...(r.runner ? { runnerToken: r.runner.token } : {}),
    };
    // The other user of the same tenant, and a member of the other tenant, leave a file in their workspaces
    // (their runtimes stay up beside the hostile member's, whose first turn here starts it). The three
    // runtimes start side by side: the model answers each by its prompt, not from the one scripted queue.
    r.llm.respond((req) => {
      const m = /^setup (\S+)$/.exec(req.lastUser.trim());
      if (!m) return undefined;
      if ((req.body.messages as Array<{ role: string }>).some((x) => x.role === 'tool')) return { text: 'done' };
      if (m[1] === 'warm') return { toolCall: { name: 'bash', arguments: { command: 'echo warm', description: 'warm' } } };
      return { toolCall: { name: 'write', arguments: { filePath: `${m[1].split('-')[0]}-secret.txt`, content: `${m[1]}\n` } } };
    });
    try {
      const setup = await Promise.all([
        agentTurn(r, acme.tokens.owner, [], { text: `setup ${ownerMarker}`, title: 'probe' }),
        agentTurn(r, beta.tokens.member, [], { text: `setup ${betaMarker}`, title: 'probe' }),
        agentTurn(r, acme.tokens.member, [], { text: 'setup warm', title: 'probe' }),
      ]);
      for (const w of setup) expect(w.tools.map((p) => p.state?.status)).toEqual(['completed']);
    } finally {
      r.llm.respond(null);
    }
  }, 300_000);
  afterAll(async () => {
    await r?.close();
  });

  const leaks = (output: string) => Object.entries(secrets).filter(([, s]) => s && output.includes(s)).map(([k]) => k);
  // Where the workspaces are: the runner's data dir when the agent runs on one (the control plane's config
  // file stays a target: on one machine it is there too).
  const dataDir = () => r.runner?.dataDir ?? r.t.env.dataDir;
  const configPath = () => r.t.env.configPath;

  // What the hostile member tries. Each must leak none of the secrets; `also` adds a probe-specific check.
  const hostile: Array<{ id: string; steps: () => FakeStep[]; also?: (out: string) => string | null }> = [
    { id: 'bash cat config.env', steps: () => bash(`cat ${configPath()}`) },
    { id: 'bash python3 reads config.env (no path-like argument)', steps: () => bash(`python3 -c 'import os; print(open(os.sep.join(${JSON.stringify(configPath().split('/'))})).read())'`) },
    { id: 'bash node reads config.env', steps: () => bash(`node -e 'console.log(require("fs").readFileSync(${JSON.stringify(configPath())}, "utf8"))'`) },
    { id: 'bash lists the data dir', steps: () => bash(`ls -laR ${dataDir()} | head -100; cat ${dataDir()}/../*.env`) },
    { id: 'read tool through a workspace symlink to config.env', steps: () => [{ toolCall: { name: 'bash', arguments: { command: `ln -sf ${configPath()} notes.txt`, description: 'link' } } }, { toolCall: { name: 'read', arguments: { filePath: 'notes.txt' } } }, { text: 'done' }] },
    { id: 'bash grep -r over every workspace', steps: () => bash(`grep -r marker ${dataDir()}/workspaces 2>&1 | head -50`) },
    { id: 'bash find / for the other users\' files', steps: () => bash(`find / \\( -name 'owner-secret*' -o -name 'beta-secret*' \\) -not -path '/proc/*' 2>/dev/null | head | xargs cat`) },
    { id: 'bash /proc/*/environ', steps: () => bash(`for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f 2>/dev/null; done | grep -a -E 'OPENCODE_SERVER_PASSWORD|AGENTWS_|DATABASE_URL' | sort -u`), also: (o) => {
        // The agent's own runtime runs beside it with its password: that opens only this user's runtime
        // (the next probe uses it). Any other runtime's, or the service's variables, must not be visible.
        const passwords = new Set(o.match(/OPENCODE_SERVER_PASSWORD=[A-Za-z0-9_-]+/g) ?? []);
        if (passwords.size > 1) return 'more than one runtime password is readable';
        return /AGENTWS_|DATABASE_URL/.test(o) ? 'service variables are readable' : null;
      } },
    { id: 'bash printenv', steps: () => bash('printenv'), also: (o) => (/AGENTWS_|DATABASE_URL|agwr_/.test(o) ? 'service variables in the environment' : null) },
    {
      id: 'the runtime\'s own API with the password found in /proc',
      steps: () =>
        bash(
          `pw=$(for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f 2>/dev/null; done | grep -a '^OPENCODE_SERVER_PASSWORD=' | head -1 | cut -d= -f2-); for port in 4096 $(ss -ltnH 2>/dev/null | awk '{print $4}' | sed 's/.*://' | sort -u); do curl -s -m 2 -u "opencode:$pw" http://127.0.0.1:$port/config; done`,
        ),
    },
    { id: 'bash curl the API /readyz', steps: () => bash(`curl -s -m 5 --noproxy '*' http://127.0.0.1:${apiPort}/readyz; curl -s -m 5 http://127.0.0.1:${apiPort}/readyz`), also: (o) => (readyBody && o.includes(readyBody.slice(0, 40)) ? 'the API answered' : null) },
    { id: 'bash TCP to PostgreSQL 127.0.0.1:5432', steps: () => bash(`timeout 5 bash -c 'exec 3<>/dev/tcp/127.0.0.1/5432 && echo PG-"CONNECTED"' 2>&1`), also: (o) => (o.includes('PG-CONNECTED') ? 'PostgreSQL accepted a connection' : null) },
    { id: 'bash TCP to 169.254.169.254 and 10.0.0.1', steps: () => bash(`for h in 169.254.169.254 10.0.0.1; do timeout 4 bash -c "exec 3<>/dev/tcp/$h/80 && echo NET-\\"CONNECTED\\" $h" 2>&1; done`), also: (o) => (o.includes('NET-CONNECTED') ? o : null) },
    { id: 'webfetch of the API /readyz', steps: () => call('webfetch', { url: `http://127.0.0.1:${apiPort}/readyz`, format: 'text' }), also: (o) => (readyBody && o.includes(readyBody.slice(0, 40)) ? 'the API answered' : null) },
    { id: 'grep tool over the data dir', steps: () => call('grep', { pattern: 'marker|AGENTWS_', path: dataDir() }) },
    { id: 'glob tool over the data dir', steps: () => call('glob', { pattern: '**/*secret*', path: dataDir() }), also: (o) => (/owner-secret|beta-secret/.test(o) ? `found: ${o.slice(0, 200)}` : null) },
  ];

  for (const probe of hostile) {
    it(`contained: ${probe.id}`, async () => {
      const { output } = await turn(acme.tokens.member, probe.steps());
      expect(leaks(output), output.slice(0, 2000)).toEqual([]);
      expect(probe.also?.(output) ?? null, output.slice(0, 2000)).toBeNull();
    });
  }

  it(`the runtimes ran on ${where}`, async () => {
    const { rows } = await r.t.opened.db.query<{ socket_path: string }>(`select socket_path from agent_runtimes where tenant_id = $1`, [acme.tenantId]);
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((x) => x.socket_path.startsWith('runner:'))).toBe(where === 'a runner host');
  });

  // Legitimate work, by the same member in the same runtime.
  it('works: write a file, then read it', async () => {
    const { tools } = await turn(acme.tokens.member, [{ toolCall: { name: 'write', arguments: { filePath: 'hello.txt', content: 'hello from the agent\n' } } }, { toolCall: { name: 'read', arguments: { filePath: 'hello.txt' } } }, { text: 'done' }]);
    expect(tools.map((p) => p.state?.status)).toEqual(['completed', 'completed']);
    expect(tools[1].state.output).toContain('hello from the agent');
  });
  it('works: git init and commit', async () => {
    const { tools, output } = await turn(acme.tokens.member, bash('rm -rf repo && git init -q repo && cd repo && git config user.email a@example.invalid && git config user.name agent && echo one > f && git add f && git commit -q -m first && git log --oneline'));
    expect(tools[0]?.state?.status).toBe('completed');
    expect(output).toMatch(/first/);
  });
  it('works: node -e and python3 -c', async () => {
    const { output } = await turn(acme.tokens.member, bash(`node -e 'console.log("node", 6*7)' && python3 -c 'print("py", 6*7)'`));
    expect(output).toMatch(/node 42/);
    expect(output).toMatch(/py 42/);
  });
  it('works: glob and grep tools find a file in the workspace', async () => {
    // One turn: the file written, then found by each tool.
    const { tools } = await turn(acme.tokens.member, [
      { toolCall: { name: 'write', arguments: { filePath: 'docs/needle.md', content: 'a needle in the haystack\n' } } },
      { toolCall: { name: 'glob', arguments: { pattern: '**/needle.md' } } },
      { toolCall: { name: 'grep', arguments: { pattern: 'needle in the' } } },
      { text: 'done' },
    ]);
    expect(tools.map((p) => p.state?.status)).toEqual(['completed', 'completed', 'completed']);
    expect(tools[1].state.output).toMatch(/needle\.md/);
    expect(tools[2].state.output).toMatch(/needle\.md/);
  });
});
