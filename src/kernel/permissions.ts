/**
 * Role permission documents (SPEC.md "Role permissions") and the one place that combines them.
 */
export interface RbacPermissions {
  agents: {
    create: boolean;
    delete: boolean;
    configure: boolean;
    /** Open a terminal in one's own sandbox (the dashboard's Terminal tab, GET /v1/workspace/terminal). */
    terminal: boolean;
    /**
     * Hand work to an agent from a git host: a comment starting with the host's mention, or its
     * trigger label, on an issue or pull request runs a session of this person (with agents.create).
     */
    code_host: boolean;
    use_templates: string[] | '*';
  };
  memory: { read_own: boolean; read_team: boolean; read_org: boolean; write: boolean; delete: boolean; share: boolean };
  tools: { allowed: string[] | '*'; denied: string[] };
  /**
   * The models a person may choose for a session or a turn: "<provider>/<model id>" references,
   * "<provider>/*" for every model of a provider, or `*` for every enabled model. The tenant's default
   * model and a template's model are the admin's choices and always usable; `[]` allows no other.
   */
  models: { allowed: string[] | '*' };
  admin: {
    manage_users: boolean;
    manage_roles: boolean;
    manage_templates: boolean;
    manage_providers: boolean;
    view_audit_log: boolean;
    manage_tenant: boolean;
  };
  cost: { monthly_limit_usd?: number; per_request_limit_usd?: number };
}

export type SystemRoleName = 'owner' | 'admin' | 'member' | 'viewer';
export const SYSTEM_ROLE_NAMES: readonly SystemRoleName[] = ['owner', 'admin', 'member', 'viewer'];

/** A document granting nothing: the base every partial document is completed from. */
export function emptyPermissions(): RbacPermissions {
  return {
    agents: { create: false, delete: false, configure: false, terminal: false, code_host: false, use_templates: [] },
    memory: { read_own: false, read_team: false, read_org: false, write: false, delete: false, share: false },
    tools: { allowed: [], denied: [] },
    models: { allowed: [] },
    admin: {
      manage_users: false,
      manage_roles: false,
      manage_templates: false,
      manage_providers: false,
      view_audit_log: false,
      manage_tenant: false,
    },
    cost: {},
  };
}

function allPermissions(): RbacPermissions {
  return {
    agents: { create: true, delete: true, configure: true, terminal: true, code_host: true, use_templates: '*' },
    memory: { read_own: true, read_team: true, read_org: true, write: true, delete: true, share: true },
    tools: { allowed: '*', denied: [] },
    models: { allowed: '*' },
    admin: {
      manage_users: true,
      manage_roles: true,
      manage_templates: true,
      manage_providers: true,
      view_audit_log: true,
      manage_tenant: true,
    },
    cost: {},
  };
}

/** The exact documents seeded for the four system roles of every new tenant. */
export function systemRolePermissions(role: SystemRoleName): RbacPermissions {
  switch (role) {
    case 'owner':
      return allPermissions();
    case 'admin': {
      const p = allPermissions();
      p.admin.manage_tenant = false;
      return p;
    }
    case 'member': {
      const p = emptyPermissions();
      p.agents.create = true;
      p.agents.terminal = true;
      p.agents.code_host = true;
      p.agents.use_templates = '*';
      p.memory.read_own = true;
      p.memory.read_team = true;
      p.memory.write = true;
      p.tools.allowed = '*';
      p.models.allowed = '*';
      return p;
    }
    case 'viewer': {
      // Read-only: may read sessions (ownership-scoped) and memories, may not run agents or tools.
      const p = emptyPermissions();
      p.memory.read_own = true;
      p.memory.read_team = true;
      return p;
    }
  }
}

export const SYSTEM_ROLE_DESCRIPTIONS: Record<SystemRoleName, string> = {
  owner: 'All permissions, including managing the tenant',
  admin: 'All permissions except managing the tenant',
  member: 'Create and use agents, open a terminal in their own workspace, hand issues to agents from git hosts, read and write own memories, read team memories',
  viewer: 'Read-only access to sessions and memories; no agent execution',
};

const unionList = (a: string[] | '*', b: string[] | '*'): string[] | '*' =>
  a === '*' || b === '*' || a.includes('*') || b.includes('*') ? '*' : [...new Set([...a, ...b])].sort();

const maxLimit = (a: number | undefined, b: number | undefined): number | undefined =>
  // No limit is the most generous limit.
  a === undefined || b === undefined ? undefined : Math.max(a, b);

/**
 * Effective permissions of a user: the union of the documents of all assigned roles. Booleans are OR'ed,
 * tool and template lists unioned (`*` absorbs), denied tools unioned, cost limits take the most generous.
 * With no roles at all the result grants nothing.
 */
export function unionPermissions(docs: RbacPermissions[]): RbacPermissions {
  if (docs.length === 0) return emptyPermissions();
  return docs.reduce((acc, d) => {
    const orGroup = <G extends Record<string, unknown>>(x: G, y: G): G =>
      Object.fromEntries(Object.keys(x).map((k) => [k, typeof x[k] === 'boolean' ? Boolean(x[k] || y[k]) : x[k]])) as G;
    return {
      agents: { ...orGroup(acc.agents, d.agents), use_templates: unionList(acc.agents.use_templates, d.agents.use_templates) },
      memory: orGroup(acc.memory, d.memory),
      tools: { allowed: unionList(acc.tools.allowed, d.tools.allowed), denied: [...new Set([...acc.tools.denied, ...d.tools.denied])].sort() },
      models: { allowed: unionList(modelsOf(acc), modelsOf(d)) },
      admin: orGroup(acc.admin, d.admin),
      cost: stripUndefined({
        monthly_limit_usd: maxLimit(acc.cost.monthly_limit_usd, d.cost.monthly_limit_usd),
        per_request_limit_usd: maxLimit(acc.cost.per_request_limit_usd, d.cost.per_request_limit_usd),
      }),
    };
  });
}

/** A document's model allow-list; one stored before allow-lists existed (no `models`) allows every model. */
const modelsOf = (p: RbacPermissions): string[] | '*' => p.models?.allowed ?? '*';

/**
 * Whether a person holding `p` may choose the model `ref` ("<provider>/<model id>"): listed, or its
 * provider listed as "<provider>/*", or every model (`*`). Says nothing of whether the model exists or its
 * provider is enabled (model-choice-fns.ts checks those).
 */
export function modelAllowed(p: RbacPermissions, ref: string): boolean {
  const allowed = modelsOf(p);
  if (allowed === '*' || allowed.includes('*') || allowed.includes(ref)) return true;
  const slash = ref.indexOf('/');
  return slash > 0 && allowed.includes(`${ref.slice(0, slash)}/*`);
}

/** Whether a tool may run: `denied` wins over `allowed`; `*` in allowed grants every tool. */
export function toolAllowed(p: RbacPermissions, tool: string): boolean {
  if (p.tools.denied.includes(tool)) return false;
  return p.tools.allowed === '*' || p.tools.allowed.includes(tool) || p.tools.allowed.includes('*');
}

function stripUndefined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/**
 * What a permission document grants beyond what `held` holds, as permission paths (empty: nothing).
 * The rule of every grant (creating a role, assigning one): nobody grants what they do not hold.
 * Booleans must be held; template and tool lists must be covered (a tool counts as granted when the
 * document allows and does not deny it, as toolAllowed reads it); a cost limit may only be as strict
 * or stricter than the holder's own (no limit is the most generous of all).
 */
export function grantsBeyond(doc: RbacPermissions, held: RbacPermissions): string[] {
  const over: string[] = [];
  for (const group of ['agents', 'memory', 'admin'] as const) {
    for (const [member, value] of Object.entries(doc[group])) {
      if (value === true && (held[group] as Record<string, unknown>)[member] !== true) over.push(`${group}.${member}`);
    }
  }
  const templates = doc.agents.use_templates;
  if (held.agents.use_templates !== '*') {
    const have = held.agents.use_templates;
    if (templates === '*') over.push('agents.use_templates:*');
    else for (const t of templates) if (!have.includes(t)) over.push(`agents.use_templates:${t}`);
  }
  const models = modelsOf(doc);
  if (models === '*' || models.includes('*')) {
    const mine = modelsOf(held);
    if (!(mine === '*' || mine.includes('*'))) over.push('models.allowed:*');
  } else {
    for (const m of models) {
      // "<provider>/*" is covered only by the same or by every model.
      if (!modelAllowed(held, m)) over.push(`models.allowed:${m}`);
    }
  }
  if (doc.tools.allowed === '*' || doc.tools.allowed.includes('*')) {
    const heldAll = held.tools.allowed === '*' || held.tools.allowed.includes('*');
    if (!heldAll) over.push('tools.allowed:*');
    else for (const t of held.tools.denied) if (!doc.tools.denied.includes(t)) over.push(`tools.allowed:${t}`);
  } else {
    for (const t of doc.tools.allowed) if (!doc.tools.denied.includes(t) && !toolAllowed(held, t)) over.push(`tools.allowed:${t}`);
  }
  for (const limit of ['monthly_limit_usd', 'per_request_limit_usd'] as const) {
    const mine = held.cost[limit];
    const theirs = doc.cost[limit];
    if (mine !== undefined && (theirs === undefined || theirs > mine)) over.push(`cost.${limit}`);
  }
  return over;
}
