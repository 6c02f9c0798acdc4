import { readFileSync } from 'node:fs';
import { Flags } from '@oclif/core';
import { ValidationError } from '../kernel/errors.js';
import type { GitAccessRule } from '../core/connectors/git-fns.js';
import type { GitHostInput, PublicGitHost } from '../core/connectors/git-hosts.service.js';
import type { UserConnections } from '../core/connectors/git-oauth-fns.js';
import { resolveSecret, type SecretKind } from './secret-input.js';
import { AccessSyntaxError, formatGitAccessRule, parseGitAccessRule } from '../lib/access-grammar.js';

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
  'push-option': Flags.string({
    summary: 'A push option agents may send (git push -o): a key such as merge_request.create, a prefix such as merge_request.*, or key=value exactly (repeatable; replaces the list). Default: none, a push carrying any is refused.',
    multiple: true,
  }),
};

/** `role:member=org/*,org/api` → {who, repos} (the grammar the dashboard reads too: lib/access-grammar.ts). */
export function parseAccess(values: string[]): GitAccessRule[] {
  return values.map((v) => {
    try {
      return parseGitAccessRule(v);
    } catch (err) {
      if (err instanceof AccessSyntaxError) throw new ValidationError(`--access ${err.message}`);
      throw err;
    }
  });
}

export async function resolveGitToken(flags: { token?: string; 'token-stdin'?: boolean }, prompt: string, required: boolean): Promise<string | undefined> {
  const token = await resolveSecret(GIT_TOKEN, { value: flags.token, stdin: flags['token-stdin'] }, { ask: required, prompt });
  if (!token && required) throw new ValidationError('a token is needed, and there is no terminal to ask for it', { hint: 'Pipe it in: printf %s "$GIT_TOKEN" | npx aws connector git add <name> --base-url <url> --token-stdin' });
  return token;
}

/** One line per host for `list` and after add/update. */
export function describeAccess(rules: GitAccessRule[]): string {
  return rules.length ? rules.map(formatGitAccessRule).join(' ') : '(nobody)';
}

/** The push options agents may send, for people. */
export function describePushOptions(options: readonly string[]): string {
  return options.length ? options.join(' ') : '(none)';
}

const CREDENTIALS = { token: 'token', 'github-app': 'github_app', none: 'none' } as const;

/** Flags of a host's service credential and per-user connections, shared by `add` and `update`. */
export const gitCredentialFlags = {
  credential: Flags.string({ summary: 'The service credential: token (default), github-app (a GitHub App installation) or none (agents act only as their people: needs --user-connections required).', options: Object.keys(CREDENTIALS) }),
  'github-app-id': Flags.string({ summary: 'GitHub App: its app id (with --credential github-app).' }),
  'github-installation-id': Flags.string({ summary: 'GitHub App: the id of its installation on the organisation.' }),
  'github-private-key-file': Flags.string({ summary: 'GitHub App: the .pem private key file GitHub gave for the app (stored sealed).' }),
  'github-api-url': Flags.string({ summary: 'GitHub App: the REST API (default api.github.com for github.com, <base-url>/api/v3 for Enterprise Server).' }),
  'oauth-preset': Flags.string({ summary: 'OAuth client for per-user connections: fill its endpoints and scopes for this kind of host.', options: ['github', 'gitlab', 'gitea'] }),
  'oauth-client-id': Flags.string({ summary: 'OAuth client: its client id (register the callback URL printed after the command at the host).' }),
  'oauth-client-secret-file': Flags.string({ summary: 'OAuth client: a file holding its client secret (stored sealed).' }),
  'oauth-authorize-url': Flags.string({ summary: 'OAuth client: the authorization endpoint (without --oauth-preset).' }),
  'oauth-token-url': Flags.string({ summary: 'OAuth client: the token endpoint (without --oauth-preset).' }),
  'oauth-user-url': Flags.string({ summary: 'OAuth client: the API answering who the token belongs to (login or username), to show the account.' }),
  'oauth-scopes': Flags.string({ summary: 'OAuth client: the scopes asked for, space-separated (default: the preset\'s).' }),
  'user-connections': Flags.string({ summary: 'Per-user connections: off, optional (a person\'s own account when connected, else the service credential) or required (their own only).', options: ['off', 'optional', 'required'] }),
};

type CredentialFlags = { [K in keyof typeof gitCredentialFlags]?: string };

/** A file a flag names, read whole; unreadable: a usage error naming the flag. */
function readFlagFile(flag: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new ValidationError(`--${flag}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/**
 * The credential and connection fields the flags give. For `update`, `current` fills what the flags leave
 * out of the GitHub App and the OAuth client (the service takes each whole): rotating only a key or a
 * secret keeps the ids and endpoints. A preset, though, replaces the endpoints it knows.
 */
export function credentialInput(f: CredentialFlags, current?: PublicGitHost): Partial<GitHostInput> {
  const out: Partial<GitHostInput> = {};
  if (f.credential) out.credentialKind = CREDENTIALS[f.credential as keyof typeof CREDENTIALS];
  const app = current?.githubApp;
  if (f['github-app-id'] ?? f['github-installation-id'] ?? f['github-private-key-file'] ?? f['github-api-url']) {
    const appId = f['github-app-id'] ?? app?.appId;
    const installationId = f['github-installation-id'] ?? app?.installationId;
    if (!appId || !installationId) throw new ValidationError('a GitHub App needs --github-app-id and --github-installation-id');
    const privateKey = f['github-private-key-file'] ? readFlagFile('github-private-key-file', f['github-private-key-file']) : undefined;
    const apiUrl = f['github-api-url'] ?? app?.apiUrl;
    out.githubApp = { appId, installationId, ...(privateKey !== undefined ? { privateKey } : {}), ...(apiUrl ? { apiUrl } : {}) };
  }
  const o = current?.oauth;
  const oauthFlags = ['oauth-preset', 'oauth-client-id', 'oauth-client-secret-file', 'oauth-authorize-url', 'oauth-token-url', 'oauth-user-url', 'oauth-scopes'] as const;
  if (oauthFlags.some((k) => f[k] !== undefined)) {
    const preset = f['oauth-preset'] as 'github' | 'gitlab' | 'gitea' | undefined;
    const kept = preset ? undefined : o;
    const clientId = f['oauth-client-id'] ?? o?.clientId;
    if (!clientId) throw new ValidationError('an OAuth client needs --oauth-client-id');
    // Files written by editors end with a newline that is no part of the secret.
    const clientSecret = f['oauth-client-secret-file'] ? readFlagFile('oauth-client-secret-file', f['oauth-client-secret-file']).replace(/[\r\n]+$/, '') : undefined;
    out.oauth = {
      ...(preset ? { preset } : {}),
      clientId,
      ...(clientSecret !== undefined ? { clientSecret } : {}),
      authorizeUrl: f['oauth-authorize-url'] ?? kept?.authorizeUrl,
      tokenUrl: f['oauth-token-url'] ?? kept?.tokenUrl,
      userUrl: f['oauth-user-url'] ?? kept?.userUrl,
      scopes: f['oauth-scopes'] ?? kept?.scopes,
    };
  }
  if (f['user-connections']) out.userConnections = f['user-connections'] as UserConnections;
  return out;
}

/** What `add` and `update` say of a host's credential and per-user connections. */
export function describeCredential(h: PublicGitHost): string {
  const kind = h.credentialKind === 'github_app' ? `GitHub App ${h.githubApp?.appId} (installation ${h.githubApp?.installationId})` : h.credentialKind;
  return `credential: ${kind}; per-user connections: ${h.userConnections}${h.oauth ? ` (OAuth client ${h.oauth.clientId})` : ''}`;
}
