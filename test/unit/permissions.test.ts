import { describe, expect, it } from 'vitest';
import { emptyPermissions, grantsBeyond, systemRolePermissions, toolAllowed, unionPermissions } from '../../src/kernel/permissions.js';

const T = true;
const F = false;

describe('system role documents', () => {
  it('owner has every permission including manage_tenant', () => {
    expect(systemRolePermissions('owner')).toEqual({
      agents: { create: T, delete: T, configure: T, terminal: T, code_host: T, use_templates: '*' },
      memory: { read_own: T, read_team: T, read_org: T, write: T, delete: T, share: T },
      tools: { allowed: '*', denied: [] },
      models: { allowed: '*' },
      admin: { manage_users: T, manage_roles: T, manage_templates: T, manage_providers: T, view_audit_log: T, manage_tenant: T },
      cost: {},
    });
  });

  it('admin has everything but manage_tenant', () => {
    const admin = systemRolePermissions('admin');
    const owner = systemRolePermissions('owner');
    expect(admin.admin.manage_tenant).toBe(false);
    expect({ ...admin, admin: { ...admin.admin, manage_tenant: true } }).toEqual(owner);
  });

  it('member creates and uses agents, opens a terminal in their workspace, reads and writes own memories, reads team memories', () => {
    expect(systemRolePermissions('member')).toEqual({
      agents: { create: T, delete: F, configure: F, terminal: T, code_host: T, use_templates: '*' },
      memory: { read_own: T, read_team: T, read_org: F, write: T, delete: F, share: F },
      tools: { allowed: '*', denied: [] },
      models: { allowed: '*' },
      admin: { manage_users: F, manage_roles: F, manage_templates: F, manage_providers: F, view_audit_log: F, manage_tenant: F },
      cost: {},
    });
  });

  it('viewer is read-only with no agent execution', () => {
    expect(systemRolePermissions('viewer')).toEqual({
      agents: { create: F, delete: F, configure: F, terminal: F, code_host: F, use_templates: [] },
      memory: { read_own: T, read_team: T, read_org: F, write: F, delete: F, share: F },
      tools: { allowed: [], denied: [] },
      models: { allowed: [] },
      admin: { manage_users: F, manage_roles: F, manage_templates: F, manage_providers: F, view_audit_log: F, manage_tenant: F },
      cost: {},
    });
  });
});

describe('unionPermissions', () => {
  it('ORs booleans, unions lists, lets * absorb, keeps denials, and takes the most generous cost limit', () => {
    const a = emptyPermissions();
    a.admin.view_audit_log = true;
    a.tools.allowed = ['read'];
    a.tools.denied = ['bash'];
    a.agents.use_templates = ['py'];
    a.cost = { monthly_limit_usd: 10, per_request_limit_usd: 1 };
    const b = emptyPermissions();
    b.memory.write = true;
    b.tools.allowed = ['edit', 'read'];
    b.agents.use_templates = '*';
    b.cost = { monthly_limit_usd: 50 };
    const u = unionPermissions([a, b]);
    expect(u.admin.view_audit_log && u.memory.write).toBe(true);
    expect(u.admin.manage_users).toBe(false);
    expect(u.tools.allowed).toEqual(['edit', 'read']);
    expect(u.tools.denied).toEqual(['bash']);
    expect(u.agents.use_templates).toBe('*');
    // b has no per-request limit: no limit is more generous than any limit.
    expect(u.cost).toEqual({ monthly_limit_usd: 50 });
  });

  it('grants nothing without roles; denied wins over allowed', () => {
    expect(unionPermissions([])).toEqual(emptyPermissions());
    const p = systemRolePermissions('member');
    p.tools.denied = ['bash'];
    expect(toolAllowed(p, 'bash')).toBe(false);
    expect(toolAllowed(p, 'edit')).toBe(true);
    expect(toolAllowed(systemRolePermissions('viewer'), 'edit')).toBe(false);
  });
});

describe('"*" given as a list', () => {
  it('means every tool and template, as the string form does (the HTTP layer may coerce "*" to ["*"])', async () => {
    const { completePermissions } = await import('../../src/core/rbac/rbac.schemas.js');
    const doc = completePermissions({ tools: { allowed: ['*'], denied: ['bash'] }, agents: { use_templates: ['*'] } });
    expect(doc.tools.allowed).toBe('*');
    expect(doc.agents.use_templates).toBe('*');
    expect(toolAllowed(doc, 'read')).toBe(true);
    expect(toolAllowed(doc, 'bash')).toBe(false);
  });
});

describe('grantsBeyond: nobody grants what they do not hold', () => {
  const doc = (f: (p: ReturnType<typeof emptyPermissions>) => void) => {
    const p = emptyPermissions();
    f(p);
    return p;
  };

  it('an owner may grant anything; an admin neither manage_tenant nor the owner document', () => {
    expect(grantsBeyond(systemRolePermissions('owner'), systemRolePermissions('owner'))).toEqual([]);
    expect(grantsBeyond(systemRolePermissions('admin'), systemRolePermissions('admin'))).toEqual([]);
    expect(grantsBeyond(systemRolePermissions('owner'), systemRolePermissions('admin'))).toEqual(['admin.manage_tenant']);
    expect(grantsBeyond(doc((p) => (p.admin.manage_tenant = true)), systemRolePermissions('admin'))).toEqual(['admin.manage_tenant']);
    expect(grantsBeyond(systemRolePermissions('member'), systemRolePermissions('admin'))).toEqual([]);
  });

  it('lists every boolean the holder lacks', () => {
    expect(grantsBeyond(systemRolePermissions('admin'), systemRolePermissions('member')).sort()).toEqual(
      ['admin.manage_providers', 'admin.manage_roles', 'admin.manage_templates', 'admin.manage_users', 'admin.view_audit_log', 'agents.configure', 'agents.delete', 'memory.delete', 'memory.read_org', 'memory.share'].sort(),
    );
  });

  it('covers templates and tools, with denied tools taken into account', () => {
    const held = doc((p) => {
      p.agents.use_templates = ['a', 'b'];
      p.tools.allowed = '*';
      p.tools.denied = ['bash'];
    });
    expect(grantsBeyond(doc((p) => (p.agents.use_templates = ['a'])), held)).toEqual([]);
    expect(grantsBeyond(doc((p) => (p.agents.use_templates = ['a', 'c'])), held)).toEqual(['agents.use_templates:c']);
    expect(grantsBeyond(doc((p) => (p.agents.use_templates = '*')), held)).toEqual(['agents.use_templates:*']);
    expect(grantsBeyond(doc((p) => (p.tools.allowed = ['read', 'edit'])), held)).toEqual([]);
    expect(grantsBeyond(doc((p) => (p.tools.allowed = ['bash'])), held)).toEqual(['tools.allowed:bash']);
    expect(grantsBeyond(doc((p) => (p.tools.allowed = '*')), held)).toEqual(['tools.allowed:bash']);
    // Allowing everything but what the holder is denied is within what they hold.
    expect(grantsBeyond(doc((p) => ((p.tools.allowed = '*'), (p.tools.denied = ['bash']))), held)).toEqual([]);
    expect(grantsBeyond(doc((p) => (p.tools.allowed = ['*'])), doc((p) => (p.tools.allowed = ['read'])))).toEqual(['tools.allowed:*']);
  });

  it('a cost limit may only be as strict or stricter than the holder\'s own', () => {
    const held = doc((p) => (p.cost = { monthly_limit_usd: 10 }));
    expect(grantsBeyond(doc((p) => (p.cost = { monthly_limit_usd: 5 })), held)).toEqual([]);
    expect(grantsBeyond(doc((p) => (p.cost = { monthly_limit_usd: 10 })), held)).toEqual([]);
    expect(grantsBeyond(doc((p) => (p.cost = { monthly_limit_usd: 11 })), held)).toEqual(['cost.monthly_limit_usd']);
    expect(grantsBeyond(doc(() => {}), held)).toEqual(['cost.monthly_limit_usd']);
    expect(grantsBeyond(doc((p) => (p.cost = { per_request_limit_usd: 1 })), doc(() => {}))).toEqual([]);
  });
});
