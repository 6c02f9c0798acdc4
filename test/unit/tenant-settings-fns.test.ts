import { describe, expect, it } from 'vitest';
import {
  checkTenantSettings,
  egressSettings,
  MIN_USERS_MAX,
  parsePrivacySettings,
  SCIM_TOKEN_MAX_DAYS_LIMIT,
  skillSettings,
  TOKEN_MAX_DAYS_LIMIT,
} from '../../src/core/tenants/tenant-settings-fns.js';
import { ValidationError } from '../../src/kernel/errors.js';

/** The field a refusal names (every 400 of the settings names one). */
function fieldOf(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return ((err as ValidationError).details as { field?: string } | undefined)?.field ?? '';
  }
  throw new Error('not refused');
}

describe('tenant settings: the rules (tenant-settings-fns)', () => {
  it('skills: minUsers from 1 to the maximum; allowed hosts lower-case, without a leading "*." or "."', () => {
    expect(skillSettings({ minUsers: 1, allowedHosts: ['*.Example.COM', '.docs.example.org', 'api.example.net'] })).toEqual({ minUsers: 1, allowedHosts: ['example.com', 'docs.example.org', 'api.example.net'] });
    expect(skillSettings({ minUsers: MIN_USERS_MAX })).toEqual({ minUsers: MIN_USERS_MAX });
    expect(skillSettings({})).toEqual({});
    for (const minUsers of [0, MIN_USERS_MAX + 1, 2.5]) expect(fieldOf(() => skillSettings({ minUsers }))).toBe('settings.skills.minUsers');
    expect(fieldOf(() => skillSettings({ allowedHosts: ['ok.example', 'not a host'] }))).toBe('settings.skills.allowedHosts');
  });

  it('egress: names, addresses and ranges are kept; ports sorted once each; keys left out stay out', () => {
    const out = egressSettings({ allow: ['Example.COM', '10.0.0.0/8'], ports: [8443, 22, 8443] });
    expect(out.ports).toEqual([22, 8443]);
    expect(out.allow).toHaveLength(2);
    expect(out.allow![0]).toBe('example.com');
    expect('deny' in out).toBe(false);
    expect(egressSettings({})).toEqual({});
    expect(fieldOf(() => egressSettings({ deny: ['not a host!'] }))).toBe('settings.egress.deny');
    expect(fieldOf(() => egressSettings({ ports: [80, 70000] }))).toBe('settings.egress.ports');
    expect(fieldOf(() => egressSettings({ ports: [0] }))).toBe('settings.egress.ports');
  });

  it('privacy: only the known policies, naming the field', () => {
    expect(parsePrivacySettings({ sharedMemoriesOnErase: 'keep-anonymous' })).toEqual({ sharedMemoriesOnErase: 'keep-anonymous' });
    expect(parsePrivacySettings({})).toEqual({});
    expect(fieldOf(() => parsePrivacySettings({ sharedMemoriesOnErase: 'keep' }))).toBe('settings.privacy.sharedMemoriesOnErase');
    expect(() => parsePrivacySettings('remove')).toThrow(ValidationError);
  });

  it('a whole update: each part checked, left-out parts undefined', () => {
    expect(checkTenantSettings(undefined, 1000)).toEqual({ quotaMb: undefined, egress: undefined, skills: undefined, memory: undefined, privacy: undefined, tokens: undefined, signIn: undefined });
    const out = checkTenantSettings({ workspace: { quotaMb: 500 }, skills: { minUsers: 3 }, memory: { agentSavesNeedRelease: true }, tokens: { maxDays: 7, scimMaxDays: 30 }, signIn: { applyGroupMapping: true } }, 1000);
    expect(out).toMatchObject({ quotaMb: 500, skills: { minUsers: 3 }, memory: { agentSavesNeedRelease: true }, tokens: { maxDays: 7, scimMaxDays: 30 }, signIn: { applyGroupMapping: true } });
    expect(out.egress).toBeUndefined();
    // null: back to the operator's default quota.
    expect(checkTenantSettings({ workspace: { quotaMb: null } }, 1000).quotaMb).toBeNull();
  });

  it('a whole update: each bound refused with its field', () => {
    expect(fieldOf(() => checkTenantSettings({ workspace: { quotaMb: 99 } }, 1000))).toBe('settings.workspace.quotaMb');
    expect(fieldOf(() => checkTenantSettings({ workspace: { quotaMb: 1001 } }, 1000))).toBe('settings.workspace.quotaMb');
    expect(fieldOf(() => checkTenantSettings({ memory: { agentSavesNeedRelease: 'yes' as unknown as boolean } }, 1000))).toBe('settings.memory.agentSavesNeedRelease');
    expect(fieldOf(() => checkTenantSettings({ tokens: { maxDays: TOKEN_MAX_DAYS_LIMIT + 1 } }, 1000))).toBe('settings.tokens.maxDays');
    expect(fieldOf(() => checkTenantSettings({ tokens: { scimMaxDays: SCIM_TOKEN_MAX_DAYS_LIMIT + 1 } }, 1000))).toBe('settings.tokens.scimMaxDays');
    expect(fieldOf(() => checkTenantSettings({ tokens: { maxDays: 0 } }, 1000))).toBe('settings.tokens.maxDays');
    expect(fieldOf(() => checkTenantSettings({ signIn: { applyGroupMapping: 1 as unknown as boolean } }, 1000))).toBe('settings.signIn.applyGroupMapping');
  });

  it('reports the first fault in the order of the fields (workspace, egress, skills, privacy, memory, tokens, sign-in)', () => {
    const bad = { workspace: { quotaMb: 1 }, egress: { ports: [0] }, skills: { minUsers: 0 }, privacy: { sharedMemoriesOnErase: 'x' }, memory: { agentSavesNeedRelease: 'x' }, tokens: { maxDays: 0 }, signIn: { applyGroupMapping: 'x' } } as unknown as Parameters<typeof checkTenantSettings>[0];
    expect(fieldOf(() => checkTenantSettings(bad, 1000))).toBe('settings.workspace.quotaMb');
    expect(fieldOf(() => checkTenantSettings({ ...bad, workspace: undefined }, 1000))).toBe('settings.egress.ports');
    expect(fieldOf(() => checkTenantSettings({ ...bad, workspace: undefined, egress: undefined }, 1000))).toBe('settings.skills.minUsers');
    expect(fieldOf(() => checkTenantSettings({ ...bad, workspace: undefined, egress: undefined, skills: undefined }, 1000))).toBe('settings.privacy.sharedMemoriesOnErase');
  });
});
