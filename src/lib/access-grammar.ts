/**
 * How people write access rules, one grammar for each concept, shared by the CLI's flags and the
 * dashboard's text areas (one rule a line), so that both read, refuse and write them alike:
 *
 * - a git host's access: `<who>=<pattern>[,<pattern>...]`, who being `role:<name>`, `team:<name>` or `*`
 *   (`role:member=acme/*,acme/api`);
 * - an MCP connector's access, for each of tools, resources and prompts: `<role>` (every one) or
 *   `<role>=<name>,<name>` (those; `<role>=` none), e.g. `member=search,get_issue`.
 *
 * Pure and importing nothing: the dashboard's bundle includes it (the one module of src it shares).
 */

/** A rule's text refused: the text quoted and what is wrong. Each adapter says where it was written. */
export class AccessSyntaxError extends Error {
  constructor(
    message: string,
    /** MCP access: the kind whose list it was in. */
    readonly kind?: McpAccessKind,
  ) {
    super(message);
    this.name = 'AccessSyntaxError';
  }
}

/** Who reaches which repositories of a git host (patterns). */
export interface GitAccessRuleText {
  who: string;
  repos: string[];
}

/** The git access grammar, as refusals name it. */
const GIT_ACCESS_SYNTAX = '<who>=<pattern>[,<pattern>...], e.g. role:member=org/*';

/** `role:member=org/*,org/api` → {who, repos}: who ends at the last `=`; a rule without one is refused. */
export function parseGitAccessRule(text: string): GitAccessRuleText {
  const eq = text.lastIndexOf('=');
  if (eq <= 0) throw new AccessSyntaxError(`"${text}" must be ${GIT_ACCESS_SYNTAX}`);
  return { who: text.slice(0, eq).trim(), repos: text.slice(eq + 1).split(',').map((p) => p.trim()).filter(Boolean) };
}

/** A git access rule as parseGitAccessRule reads it. */
export function formatGitAccessRule(rule: GitAccessRuleText): string {
  return `${rule.who}=${rule.repos.join(',')}`;
}

const MCP_ACCESS_KINDS = ['tools', 'resources', 'prompts'] as const;
export type McpAccessKind = (typeof MCP_ACCESS_KINDS)[number];
/** Every one of a kind (`*`), or those named. */
type McpAccessList = '*' | string[];

/** One role's list of one kind. */
export interface McpAccessSpec {
  role: string;
  list: McpAccessList;
}

/** One role's access to an MCP connector: its tools, resources and prompts. */
export interface McpAccessText {
  role: string;
  tools: McpAccessList;
  resources?: McpAccessList;
  prompts?: McpAccessList;
}

/** `member` (every one), `member=a,b` (those), `member=*` (every one) or `member=` (none): the role ends at the first `=`. */
export function parseMcpAccessSpec(text: string, kind?: McpAccessKind): McpAccessSpec {
  const at = text.indexOf('=');
  const role = (at < 0 ? text : text.slice(0, at)).trim();
  if (!role) throw new AccessSyntaxError(`"${text}": name a role`, kind);
  if (at < 0) return { role, list: '*' };
  const list = text.slice(at + 1).trim();
  return { role, list: list === '*' ? '*' : list ? list.split(',').map((t) => t.trim()).filter(Boolean) : [] };
}

/** A role's list as parseMcpAccessSpec reads it: the bare role for every one. */
export function formatMcpAccessSpec(spec: McpAccessSpec): string {
  return spec.list === '*' ? spec.role : `${spec.role}=${spec.list.join(',')}`;
}

/**
 * The access list of an MCP connector from the specs of each kind: one entry per role named in any of
 * them, with none of a kind it is not named in. A role named twice in one kind is refused (its whole list
 * is given once).
 */
export function parseMcpAccess(specs: Partial<Record<McpAccessKind, readonly string[]>>): Array<Required<McpAccessText>> {
  const byRole = new Map<string, Required<McpAccessText>>();
  for (const kind of MCP_ACCESS_KINDS) {
    const seen = new Set<string>();
    for (const text of specs[kind] ?? []) {
      const { role, list } = parseMcpAccessSpec(text, kind);
      if (seen.has(role)) throw new AccessSyntaxError(`names the role ${role} twice: give its whole list once`, kind);
      seen.add(role);
      let e = byRole.get(role);
      if (!e) byRole.set(role, (e = { role, tools: [], resources: [], prompts: [] }));
      e[kind] = list;
    }
  }
  return [...byRole.values()];
}

/**
 * The specs of one kind of an access list, as parseMcpAccess reads them: every role for tools (a role
 * with none still has the server), only the roles given some for resources and prompts.
 */
export function formatMcpAccess(access: readonly McpAccessText[], kind: McpAccessKind): string[] {
  return access.filter((a) => kind === 'tools' || a[kind] === '*' || (a[kind]?.length ?? 0) > 0).map((a) => formatMcpAccessSpec({ role: a.role, list: a[kind] ?? [] }));
}
