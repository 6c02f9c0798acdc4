import { Flags } from '@oclif/core';
import type { McpAccessEntry } from '../core/connectors/mcp-fns.js';
import { ValidationError } from '../kernel/errors.js';
import { resolveSecret } from './secret-input.js';

/** One `<role>` (all) or `<role>=<a>,<b>` (those) spec of a flag. */
function parseSpec(flag: string, spec: string, example: string): { role: string; list: '*' | string[] } {
  const at = spec.indexOf('=');
  const role = (at < 0 ? spec : spec.slice(0, at)).trim();
  if (!role) throw new ValidationError(`--${flag} "${spec}": name a role, e.g. --${flag} ${example}`);
  if (at < 0) return { role, list: '*' };
  const list = spec.slice(at + 1).trim();
  return { role, list: list === '*' ? '*' : list ? list.split(',').map((t) => t.trim()).filter(Boolean) : [] };
}

/**
 * The access list of an MCP connector as the CLI writes it, one entry per role named in any of:
 * `--allow <role>` (every tool) or `--allow <role>=<tool>,<tool>` (those tools); `--allow-resources
 * <role>` (every resource) or `<role>=<uri>,<prefix>*`; `--allow-prompts <role>` (every prompt) or
 * `<role>=<prompt>,...`. Each repeatable; a role not named in one of them gets none of that kind.
 */
export function parseAllow(tools: readonly string[], resources: readonly string[] = [], prompts: readonly string[] = []): McpAccessEntry[] {
  const byRole = new Map<string, Required<McpAccessEntry>>();
  const entry = (role: string) => {
    let e = byRole.get(role);
    if (!e) byRole.set(role, (e = { role, tools: [], resources: [], prompts: [] }));
    return e;
  };
  const take = (flag: string, specs: readonly string[], kind: 'tools' | 'resources' | 'prompts', example: string) => {
    const seen = new Set<string>();
    for (const spec of specs) {
      const { role, list } = parseSpec(flag, spec, example);
      if (seen.has(role)) throw new ValidationError(`--${flag} names the role ${role} twice: give its whole list once, e.g. --${flag} ${example}`);
      seen.add(role);
      entry(role)[kind] = list;
    }
  };
  take('allow', tools, 'tools', 'member=search,get_issue');
  take('allow-resources', resources, 'resources', '"member=docs://handbook/*"');
  take('allow-prompts', prompts, 'prompts', 'member=triage');
  return [...byRole.values()];
}

const listText = (l: '*' | readonly string[] | undefined) => (l === '*' ? '*' : (l ?? []).join(','));

/** The access list as one word per role, for people: `member=search;resources=docs://x/*;prompts=triage`. */
export function accessText(access: readonly McpAccessEntry[]): string {
  if (!access.length) return '(no role)';
  return access
    .map((a) => {
      const parts = [`${a.role}=${listText(a.tools) || '(no tools)'}`];
      if (a.resources === '*' || a.resources?.length) parts.push(`resources=${listText(a.resources)}`);
      if (a.prompts === '*' || a.prompts?.length) parts.push(`prompts=${listText(a.prompts)}`);
      return parts.join(';');
    })
    .join(' ');
}

export const ALLOW_FLAG_TEXT = {
  summary: 'A role that may use the server: <role> for every tool, <role>=<tool>,<tool> for those tools (repeatable).',
};
export const ALLOW_RESOURCES_FLAG_TEXT = {
  summary: 'A role that may read the server\'s resources: <role> for all, <role>=<uri>,<prefix>* for those (e.g. member=docs://handbook/*; repeatable). Default: none.',
};
export const ALLOW_PROMPTS_FLAG_TEXT = {
  summary: 'A role that may get the server\'s prompts: <role> for all, <role>=<prompt>,<prompt> for those (repeatable). Default: none.',
};

/** Every way to hand over a connector's secret (add and update). */
export const secretFlags = {
  'secret-stdin': Flags.boolean({ summary: 'Read the token (or header value) from stdin (printf %s "$TOKEN" | ...); in a terminal, ask for it (masked).', exclusive: ['secret'] }),
  secret: Flags.string({ summary: 'The token itself (warns: it may be recorded in shell history; prefer --secret-stdin).', exclusive: ['secret-stdin'] }),
};

/** A connector's secret: piped, asked for (masked) or given, by the shared secret rules. */
export function resolveConnectorSecret(sources: { value?: string; stdin?: boolean }, prompt: string): Promise<string | undefined> {
  return resolveSecret({ flag: 'secret', noun: 'token', short: 'token', shellVar: '$TOKEN' }, sources, { ask: false, prompt });
}
