import { Flags } from '@oclif/core';
import { ValidationError } from '../core/errors.js';
import type { GitAccessRule } from '../core/connectors/git-fns.js';
import { resolveSecret, type SecretKind } from './secret-input.js';

const GIT_TOKEN: SecretKind = { flag: 'token', noun: 'git token', short: 'token', shellVar: '$GIT_TOKEN' };

/** Flags shared by `connector git add` and `update`. */
export const gitHostFlags = {
  'token-stdin': Flags.boolean({ summary: 'Read the host\'s token from stdin (printf %s "$GIT_TOKEN" | ...); in a terminal, ask for it (masked).', exclusive: ['token'] }),
  token: Flags.string({ summary: 'The token itself (warns: it may be recorded in shell history; prefer --token-stdin).', exclusive: ['token-stdin'] }),
  username: Flags.string({ summary: 'User name sent with the token (Basic authentication); default x-access-token (GitHub; GitLab and Gitea accept any name).' }),
  access: Flags.string({ summary: 'Who reaches which repositories: <who>=<pattern>[,<pattern>...], who is role:<name>, team:<name> or * (repeatable; replaces the list).', multiple: true }),
  protect: Flags.string({ summary: 'A ref agents may never push to, e.g. refs/heads/main or refs/heads/release/* (repeatable; replaces the list).', multiple: true }),
  'no-protect-default': Flags.boolean({ summary: 'Do not protect the host\'s default branch (its HEAD) besides the listed refs.' }),
  'branch-prefix': Flags.string({ summary: 'Where agents push, with {handle} for the user (default agent/{handle}/).' }),
};

/** `role:member=org/*,org/api` → {who, repos}. */
export function parseAccess(values: string[]): GitAccessRule[] {
  return values.map((v) => {
    const eq = v.lastIndexOf('=');
    if (eq <= 0) throw new ValidationError(`--access "${v}" must be <who>=<pattern>[,<pattern>...], e.g. role:member=org/*`);
    return { who: v.slice(0, eq).trim(), repos: v.slice(eq + 1).split(',').map((p) => p.trim()).filter(Boolean) };
  });
}

export async function resolveGitToken(flags: { token?: string; 'token-stdin'?: boolean }, prompt: string, required: boolean): Promise<string | undefined> {
  const token = await resolveSecret(GIT_TOKEN, { value: flags.token, stdin: flags['token-stdin'] }, { ask: required, prompt });
  if (!token && required) throw new ValidationError('a token is needed, and there is no terminal to ask for it', { hint: 'Pipe it in: printf %s "$GIT_TOKEN" | npx aws connector git add <name> --base-url <url> --token-stdin' });
  return token;
}

/** One line per host for `list` and after add/update. */
export function describeAccess(rules: GitAccessRule[]): string {
  return rules.length ? rules.map((r) => `${r.who}=${r.repos.join(',')}`).join(' ') : '(nobody)';
}
