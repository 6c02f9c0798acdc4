import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { ValidationError } from '../../kernel/errors.js';
import { emptyPermissions, type RbacPermissions } from '../../kernel/permissions.js';

const Names = Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 500 });
const NamesOrAll = Type.Union([Names, Type.Literal('*')]);
const Flag = Type.Optional(Type.Boolean());
// "<provider>/<model id>" (a model id may hold slashes: "openrouter/anthropic/claude"), "<provider>/*", or "*".
const ModelRefs = Type.Union([
  Type.Array(Type.String({ minLength: 1, maxLength: 241, pattern: '^(\\*|[a-z0-9][a-z0-9-]{0,39}/.+)$' }), { maxItems: 500 }),
  Type.Literal('*'),
]);
const Usd = Type.Optional(Type.Number({ minimum: 0 }));

/** A permission document where every member is optional; missing members mean "not granted". */
export const PartialPermissions = Type.Object(
  {
    agents: Type.Optional(Type.Object({ create: Flag, delete: Flag, configure: Flag, terminal: Flag, code_host: Flag, use_templates: Type.Optional(NamesOrAll) }, { additionalProperties: false })),
    memory: Type.Optional(
      Type.Object({ read_own: Flag, read_team: Flag, read_org: Flag, write: Flag, delete: Flag, share: Flag }, { additionalProperties: false }),
    ),
    tools: Type.Optional(Type.Object({ allowed: Type.Optional(NamesOrAll), denied: Type.Optional(Names) }, { additionalProperties: false })),
    models: Type.Optional(Type.Object({ allowed: Type.Optional(ModelRefs) }, { additionalProperties: false })),
    admin: Type.Optional(
      Type.Object(
        { manage_users: Flag, manage_roles: Flag, manage_templates: Flag, manage_providers: Flag, view_audit_log: Flag, manage_tenant: Flag },
        { additionalProperties: false },
      ),
    ),
    cost: Type.Optional(Type.Object({ monthly_limit_usd: Usd, per_request_limit_usd: Usd }, { additionalProperties: false })),
  },
  { additionalProperties: false, $id: 'PartialPermissions' },
);
export type PartialPermissions = Static<typeof PartialPermissions>;

/** Validates a partial document (every problem listed) and completes it: missing members are false/empty. */
export function completePermissions(input: unknown): RbacPermissions {
  if (!Value.Check(PartialPermissions, input)) {
    const problems = [...Value.Errors(PartialPermissions, input)].map((e) => `${e.path || '/'}: ${e.message}`);
    throw new ValidationError(`invalid permission document: ${problems.join('; ')}`, { details: { problems } });
  }
  const base = emptyPermissions();
  const p = input as PartialPermissions;
  // `["*"]` means the same as `"*"`: keep one spelling in stored documents.
  const all = <T extends string[] | '*' | undefined>(v: T): T => (Array.isArray(v) && v.includes('*') ? ('*' as T) : v);
  return {
    agents: { ...base.agents, ...p.agents, use_templates: all(p.agents?.use_templates) ?? base.agents.use_templates },
    memory: { ...base.memory, ...p.memory },
    tools: { ...base.tools, ...p.tools, allowed: all(p.tools?.allowed) ?? base.tools.allowed },
    // As every member, a missing model list grants none: `[]` limits a role to the tenant's
    // default model and its templates' models. Roles stored before lists existed got `*` (migration 0036).
    models: { allowed: all(p.models?.allowed) ?? base.models.allowed },
    admin: { ...base.admin, ...p.admin },
    cost: { ...p.cost },
  };
}

export const ROLE_NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/;
