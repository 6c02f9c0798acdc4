import { describe, expect, it } from 'vitest';
import { readRunnerSettings } from '../../src/runner/runner-settings.js';
import { controlProof, proofHolds, relayKey } from '../../src/core/runtime/host/runner-protocol.js';
import { createHash } from 'node:crypto';

const host = { hostname: 'Runner-1', readFile: (p: string) => (p === '/etc/agentws/token' ? 'agwr_abcdefghijklmnopqrstuvwxyz012345\n' : (() => { throw new Error('ENOENT'); })()), resolvePath: (p: string) => `/abs/${p}` };
const TOKEN = 'agwr_abcdefghijklmnopqrstuvwxyz012345';

describe('runner settings', () => {
  it('reads what a runner needs, with the defaults a runner host expects', () => {
    const r = readRunnerSettings({ AGENTWS_CONTROL_URL: 'https://agents.example.com/', AGENTWS_RUNNER_TOKEN: TOKEN, AGENTWS_RUNNER_LABELS: 'zone=a, gpu=no' }, {}, host);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value).toMatchObject({ controlUrl: 'https://agents.example.com', token: TOKEN, name: 'runner-1', labels: { zone: 'a', gpu: 'no' }, sandbox: true, sharedStorage: false, max: null, idleMs: 240 * 60_000, freezeAfterMs: 10_000 });
  });

  it('the limits of each runtime, as serve reads them (the quota comes from the control plane)', () => {
    const base = { AGENTWS_CONTROL_URL: 'http://10.0.0.1:8080', AGENTWS_RUNNER_TOKEN: TOKEN };
    const d = readRunnerSettings(base, {}, host);
    expect(d.ok && { memoryMax: d.value.memoryMax, pidsMax: d.value.pidsMax, tmpBytes: d.value.tmpBytes }).toEqual({ memoryMax: 'auto', pidsMax: 1024, tmpBytes: 1024 ** 3 });
    const s = readRunnerSettings({ ...base, AGENTWS_RUNTIME_MEMORY_MAX: '2GiB', AGENTWS_RUNTIME_PIDS_MAX: 'off', AGENTWS_RUNTIME_TMP_SIZE: '128MiB' }, {}, host);
    expect(s.ok && { memoryMax: s.value.memoryMax, pidsMax: s.value.pidsMax, tmpBytes: s.value.tmpBytes }).toEqual({ memoryMax: 2 * 1024 ** 3, pidsMax: null, tmpBytes: 128 * 1024 ** 2 });
    const bad = readRunnerSettings({ ...base, AGENTWS_RUNTIME_MEMORY_MAX: 'lots', AGENTWS_RUNTIME_PIDS_MAX: '5' }, {}, host);
    expect(!bad.ok && bad.problems.map((p) => p.variable).sort()).toEqual(['AGENTWS_RUNTIME_MEMORY_MAX', 'AGENTWS_RUNTIME_PIDS_MAX']);
  });

  it('takes the token from a file, and flags over the environment', () => {
    const r = readRunnerSettings({ AGENTWS_CONTROL_URL: 'http://10.0.0.1:8080', AGENTWS_RUNNER_TOKEN_FILE: '/etc/agentws/token', AGENTWS_RUNNER_NAME: 'env-name' }, { name: 'flag-name', dataDir: 'd' }, host);
    expect(r.ok && r.value.token).toBe(TOKEN);
    expect(r.ok && r.value.name).toBe('flag-name');
    expect(r.ok && r.value.dataDir).toBe('/abs/d');
  });

  it('refuses to start holding a secret of the control plane, and names each one', () => {
    const r = readRunnerSettings({ AGENTWS_CONTROL_URL: 'http://cp', AGENTWS_RUNNER_TOKEN: TOKEN, DATABASE_URL: 'postgres://x', AGENTWS_ENCRYPTION_KEY: 'k' }, {}, host);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems.map((p) => p.variable).sort()).toEqual(['AGENTWS_ENCRYPTION_KEY', 'DATABASE_URL']);
  });

  it('reports every bad setting together', () => {
    const r = readRunnerSettings({ AGENTWS_CONTROL_URL: 'ftp://x', AGENTWS_RUNNER_TOKEN: 'nope', AGENTWS_RUNNER_LABELS: 'bad label', AGENTWS_RUNTIME_MAX: '0', AGENTWS_RUNTIME_SANDBOX: 'off' }, {}, host);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.problems.map((p) => p.variable).sort()).toEqual(['AGENTWS_CONTROL_URL', 'AGENTWS_RUNNER_LABELS', 'AGENTWS_RUNNER_TOKEN', 'AGENTWS_RUNTIME_MAX', 'AGENTWS_RUNTIME_SANDBOX']);
  });

  it('says where a missing token comes from', () => {
    const r = readRunnerSettings({ AGENTWS_CONTROL_URL: 'http://cp' }, {}, host);
    expect(!r.ok && r.problems[0].message).toMatch(/aws runner token create/);
  });
});

describe('runner channel proof', () => {
  it('holds only for the control plane that stores the token\'s hash, and for this nonce', () => {
    const hash = createHash('sha256').update(TOKEN).digest('hex');
    const proof = controlProof(hash, 'nonce-1234567890abcdef');
    expect(proofHolds(TOKEN, 'nonce-1234567890abcdef', proof)).toBe(true);
    expect(proofHolds(TOKEN, 'another-nonce-1234567890', proof)).toBe(false);
    expect(proofHolds(`${TOKEN}x`, 'nonce-1234567890abcdef', proof)).toBe(false);
    expect(proofHolds(TOKEN, 'nonce-1234567890abcdef', undefined)).toBe(false);
    // The relay key is the control plane's own: it is neither the token nor derivable from it.
    expect(relayKey('secret-a')).not.toBe(relayKey('secret-b'));
  });
});
