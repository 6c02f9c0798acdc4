import { Flags } from '@oclif/core';
import type { McpAccessEntry } from '../core/connectors/mcp-fns.js';
import { ValidationError } from '../kernel/errors.js';
import { resolveSecret } from './secret-input.js';

/**
 * `--allow <role>` (every tool) or `--allow <role>=<tool>,<tool>` (those tools), repeatable: the access
 * list of an MCP connector as the CLI writes it.
 */
export function parseAllow(specs: readonly string[]): McpAccessEntry[] {
  return specs.map((spec) => {
    const at = spec.indexOf('=');
    const role = (at < 0 ? spec : spec.slice(0, at)).trim();
    if (!role) throw new ValidationError(`--allow "${spec}": name a role, e.g. --allow member or --allow member=search,get_issue`);
    if (at < 0) return { role, tools: '*' as const };
    const list = spec.slice(at + 1).trim();
    if (list === '*') return { role, tools: '*' as const };
    return { role, tools: list ? list.split(',').map((t) => t.trim()).filter(Boolean) : [] };
  });
}

/** The access list as one line per role, for people. */
export function accessText(access: readonly McpAccessEntry[]): string {
  return access.length ? access.map((a) => `${a.role}=${a.tools === '*' ? '*' : a.tools.join(',') || '(no tools)'}`).join(' ') : '(no role)';
}

export const ALLOW_FLAG_TEXT = {
  summary: 'A role that may use the server: <role> for every tool, <role>=<tool>,<tool> for those tools (repeatable).',
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
