import { Flags } from '@oclif/core';
import type { McpAccessEntry } from '../core/connectors/mcp-fns.js';
import { ValidationError } from '../kernel/errors.js';
import { resolveSecret } from './secret-input.js';
import { AccessSyntaxError, parseMcpAccess, type McpAccessKind } from '../lib/access-grammar.js';

/** Each kind's flag, and an example of it. */
const FLAGS: Record<McpAccessKind, { flag: string; example: string }> = {
  tools: { flag: 'allow', example: 'member=search,get_issue' },
  resources: { flag: 'allow-resources', example: '"member=docs://handbook/*"' },
  prompts: { flag: 'allow-prompts', example: 'member=triage' },
};

/**
 * The access list of an MCP connector as the CLI writes it, one entry per role named in any of:
 * `--allow <role>` (every tool) or `--allow <role>=<tool>,<tool>` (those tools); `--allow-resources
 * <role>` (every resource) or `<role>=<uri>,<prefix>*`; `--allow-prompts <role>` (every prompt) or
 * `<role>=<prompt>,...`. Each repeatable; a role not named in one of them gets none of that kind. The
 * grammar the dashboard reads too (lib/access-grammar.ts).
 */
export function parseAllow(tools: readonly string[], resources: readonly string[] = [], prompts: readonly string[] = []): McpAccessEntry[] {
  try {
    return parseMcpAccess({ tools, resources, prompts });
  } catch (err) {
    if (!(err instanceof AccessSyntaxError) || !err.kind) throw err;
    const { flag, example } = FLAGS[err.kind];
    throw new ValidationError(`--${flag} ${err.message}, e.g. --${flag} ${example}`);
  }
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
