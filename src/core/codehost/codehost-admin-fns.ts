/**
 * The admin's webhook settings of a git host, pure: what a mention, a label and a repository
 * pattern may be, and the webhook's public URL. Every value comes from an admin's form or the CLI and
 * ends up compared against hostile comment bodies, so each is checked against a narrow shape.
 */
import { randomBytes } from 'node:crypto';
import { checkAccessRules } from '../connectors/git-fns.js';
import { CODE_HOST_KINDS, WEBHOOK_PATH, type CodeHostKind } from './codehost-contract.js';

/** `@agent`, `@bot-name`, `@acme.ai`: an at sign and a name as the hosts allow user names. */
const MENTION_RE = /^@[A-Za-z0-9._-]{1,60}$/;
/** Printable, no control characters, 1-50 (GitHub allows 50 characters for a label name). */
const LABEL_RE = /^[^\p{Cc}\p{Cf}]{1,50}$/u;
const MAX_WEBHOOK_REPOS = 100;

export function checkKind(kind: unknown): CodeHostKind {
  if (!CODE_HOST_KINDS.includes(kind as CodeHostKind)) throw new Error(`kind must be one of ${CODE_HOST_KINDS.join(', ')}`);
  return kind as CodeHostKind;
}

export function checkMention(mention: unknown): string {
  if (typeof mention !== 'string' || !MENTION_RE.test(mention)) throw new Error('mention must be "@" and a name of letters, digits, ".", "_" or "-" (at most 60), e.g. @agent');
  return mention;
}

export function checkLabel(label: unknown): string {
  if (typeof label !== 'string' || label.trim() !== label || !LABEL_RE.test(label)) throw new Error('label must be 1 to 50 printable characters without leading or trailing spaces, e.g. agent');
  return label;
}

/**
 * Repository patterns a delivery must match to trigger anything (`org/*`, `org/**`, `org/repo`), checked
 * by the same rule as the host's access patterns. Empty is allowed: then no repository triggers.
 */
export function checkRepos(repos: unknown): string[] {
  if (!Array.isArray(repos) || repos.length > MAX_WEBHOOK_REPOS) throw new Error(`repos must list at most ${MAX_WEBHOOK_REPOS} patterns`);
  if (!repos.length) return [];
  try {
    return [...new Set(checkAccessRules([{ who: '*', repos }])[0]!.repos)];
  } catch (err) {
    // The access rule's message names access[0]; the admin gave a list of repositories.
    throw new Error((err as Error).message.replace(/^access\[0\]\.repos: /, 'repos: '));
  }
}

/** The id in the webhook's URL: 24 random base64url characters (144 bits), naming neither the tenant nor the host. */
export const newHookId = () => randomBytes(18).toString('base64url');
/** The shared secret the host signs (or sends) with: 32 random bytes. */
export const newWebhookSecret = () => randomBytes(32).toString('base64url');

/** Where the host sends its deliveries: the service's public URL and the random id (WEBHOOK_PATH). */
export function webhookUrl(publicUrl: string, hookId: string): string {
  return `${publicUrl.replace(/\/+$/, '')}${WEBHOOK_PATH.replace(':hookId', encodeURIComponent(hookId))}`;
}

/** What the host's webhook page asks for, named as that host names it (the dashboard and the CLI say it). */
export function setupHint(kind: CodeHostKind): { secretField: string; events: string[]; contentType: string | null } {
  switch (kind) {
    case 'github':
      return { secretField: 'Secret', events: ['Issue comments', 'Issues', 'Pull request review comments'], contentType: 'application/json' };
    case 'gitlab':
      return { secretField: 'Secret token', events: ['Comments', 'Issues events', 'Merge request events'], contentType: null };
    case 'gitea':
      return { secretField: 'Secret', events: ['Issue Comment', 'Issues', 'Pull Request'], contentType: 'application/json' };
  }
}
