import { describe, expect, it } from 'vitest';
import { systemRolePermissions } from '../../src/kernel/permissions.js';
import { hashToken, maskPermissions, maxDaysOf, newPersonalToken, refusesMethod, scopesBeyond } from '../../src/core/tokens/token-fns.js';

describe('personal token rules', () => {
  it('makes recognisable tokens and stores only their hash', () => {
    const a = newPersonalToken();
    expect(a.token).toMatch(/^agentws_pat_[A-Za-z0-9_-]{43}$/);
    expect(a.hash).toBe(hashToken(a.token));
    expect(a.hash).not.toContain(a.token.slice(12));
    expect(a.prefix).toBe(a.token.slice(0, 18));
    expect(newPersonalToken().token).not.toBe(a.token);
  });

  it('keeps only what the scopes reach; read keeps everything for GET only', () => {
    const owner = systemRolePermissions('owner');
    const s = maskPermissions(owner, ['sessions'], false);
    expect(s.agents.create).toBe(true);
    expect(s.memory.write).toBe(false);
    expect(s.admin.manage_users).toBe(false);
    expect(maskPermissions(owner, ['read'], true)).toEqual(owner);
    expect(maskPermissions(owner, ['read', 'memories'], false).agents.create).toBe(false);
    expect(maskPermissions(owner, ['read', 'memories'], false).memory.write).toBe(true);
    expect(maskPermissions(owner, ['memories'], true).tools.allowed).toEqual([]);
    // Never wider than the person: a member's admin-scoped token has no admin permission.
    expect(maskPermissions(systemRolePermissions('member'), ['admin'], false).admin.manage_users).toBe(false);
  });

  it('refuses writes to read-only tokens, and scopes the person does not hold', () => {
    expect(refusesMethod(['read'], 'POST')).toBe(true);
    expect(refusesMethod(['read'], 'HEAD')).toBe(false);
    expect(refusesMethod(['read', 'sessions'], 'DELETE')).toBe(false);
    expect(scopesBeyond(systemRolePermissions('viewer'), ['read', 'memories', 'sessions', 'admin'])).toEqual(['sessions', 'admin']);
    expect(scopesBeyond(systemRolePermissions('admin'), ['read', 'memories', 'sessions', 'admin'])).toEqual([]);
  });

  it('reads the tenant maximum, 90 days unless set within 1..366', () => {
    expect(maxDaysOf({})).toBe(90);
    expect(maxDaysOf({ tokens: { maxDays: 30 } })).toBe(30);
    expect(maxDaysOf({ tokens: { maxDays: 999 } })).toBe(90);
  });
});
