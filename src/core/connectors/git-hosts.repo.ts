import type { Queryable } from '../../db/database.js';
import type { GitAccessRule } from './git-fns.js';
import type { GitOAuthClient, UserConnections } from './git-oauth-fns.js';

export type GitCredentialKind = 'token' | 'github_app' | 'none';
/** A GitHub App installation (its private key is the host's sealed secret). */
interface GitHubApp {
  appId: string;
  installationId: string;
  apiUrl: string;
}

/** Which host software a git host is (its `kind`): what code hosts (codehost/) speak webhooks and REST to. */
export type CodeHostKind = 'github' | 'gitlab' | 'gitea';

export interface GitHostRow {
  id: string;
  tenantId: string;
  name: string;
  baseUrl: string;
  username: string;
  credentialKind: GitCredentialKind;
  /** The token, or the GitHub App's private key; null when the host has no service credential. */
  secretSealed: string | null;
  app: GitHubApp | null;
  oauth: GitOAuthClient | null;
  oauthSecretSealed: string | null;
  userConnections: UserConnections;
  access: GitAccessRule[];
  protectedRefs: string[];
  protectDefault: boolean;
  branchPrefix: string;
  /** Push options agents may send (git-fns.ts pushOptionAllowed); empty: none. */
  pushOptions: string[];
  /** Which host software it is (how its webhooks and REST calls look); null until webhooks are set up. */
  kind: CodeHostKind | null;
  /** The random id in the webhook URL (/v1/codehost/webhooks/<id>); null: no webhook. */
  webhookId: string | null;
  webhookSecretSealed: string | null;
  webhookEnabled: boolean;
  /** A comment starting with this asks the agent (`@agent`). */
  mention: string;
  /** Adding this label asks the agent (`agent`). */
  triggerLabel: string;
  /** Repository patterns (git-fns.ts repoMatches) whose issues may ask; empty: none. */
  webhookRepos: string[];
  createdAt: Date;
  updatedAt: Date;
}

const HOST = `h.id, h.tenant_id as "tenantId", h.name, h.base_url as "baseUrl", h.username, h.credential_kind as "credentialKind", h.secret_sealed as "secretSealed",
  h.app, h.oauth, h.oauth_secret_sealed as "oauthSecretSealed", h.user_connections as "userConnections", h.access,
  h.protected_refs as "protectedRefs", h.protect_default as "protectDefault", h.branch_prefix as "branchPrefix", h.push_options as "pushOptions",
  h.kind, h.webhook_id as "webhookId", h.webhook_secret_sealed as "webhookSecretSealed", h.webhook_enabled as "webhookEnabled", h.mention,
  h.trigger_label as "triggerLabel", h.webhook_repos as "webhookRepos", h.created_at as "createdAt", h.updated_at as "updatedAt"`;

/** The webhook columns: written by the code-host admin service's own SQL, not by insert/update here. */
export type WebhookColumns = 'kind' | 'webhookId' | 'webhookSecretSealed' | 'webhookEnabled' | 'mention' | 'triggerLabel' | 'webhookRepos';

/** The webhook columns of a host without webhooks (their defaults, migration 0038). */
export const NO_WEBHOOK: Pick<GitHostRow, WebhookColumns> = Object.freeze({ kind: null, webhookId: null, webhookSecretSealed: null, webhookEnabled: false, mention: '@agent', triggerLabel: 'agent', webhookRepos: [] });

export type GitHostPatch = Partial<Pick<GitHostRow, 'baseUrl' | 'username' | 'credentialKind' | 'secretSealed' | 'app' | 'oauth' | 'oauthSecretSealed' | 'userConnections' | 'access' | 'protectedRefs' | 'protectDefault' | 'branchPrefix' | 'pushOptions'>>;

export function createGitHostsRepo() {
  return {
    async list(q: Queryable, tenantId: string): Promise<GitHostRow[]> {
      return (await q.query<GitHostRow>(`select ${HOST} from git_hosts h where h.tenant_id = $1 order by h.name`, [tenantId])).rows;
    },
    async findByName(q: Queryable, tenantId: string, name: string): Promise<GitHostRow | null> {
      return (await q.query<GitHostRow>(`select ${HOST} from git_hosts h where h.tenant_id = $1 and h.name = $2`, [tenantId, name])).rows[0] ?? null;
    },
    /** Null when the tenant has a host of that name already. Webhooks start off (their columns' defaults). */
    async insert(q: Queryable, h: Omit<GitHostRow, 'id' | 'createdAt' | 'updatedAt' | WebhookColumns>): Promise<GitHostRow | null> {
      const { rows } = await q.query<GitHostRow>(
        `insert into git_hosts as h (tenant_id, name, base_url, username, secret_sealed, access, protected_refs, protect_default, branch_prefix,
                                     credential_kind, app, oauth, oauth_secret_sealed, user_connections, push_options)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) on conflict (tenant_id, name) do nothing returning ${HOST}`,
        [h.tenantId, h.name, h.baseUrl, h.username, h.secretSealed, JSON.stringify(h.access), h.protectedRefs, h.protectDefault, h.branchPrefix,
         h.credentialKind, h.app ? JSON.stringify(h.app) : null, h.oauth ? JSON.stringify(h.oauth) : null, h.oauthSecretSealed, h.userConnections, h.pushOptions],
      );
      return rows[0] ?? null;
    },
    /**
     * The host a webhook delivery names: the one lookup not filtered by tenant, since a delivery
     * arrives before anyone is known; the random id is the only thing it is found by, and the delivery must
     * then verify with that host's secret.
     */
    async findByWebhookId(q: Queryable, webhookId: string): Promise<GitHostRow | null> {
      return (await q.query<GitHostRow>(`select ${HOST} from git_hosts h where h.webhook_id = $1`, [webhookId])).rows[0] ?? null;
    },
    async findById(q: Queryable, tenantId: string, id: string): Promise<GitHostRow | null> {
      return (await q.query<GitHostRow>(`select ${HOST} from git_hosts h where h.tenant_id = $1 and h.id = $2`, [tenantId, id])).rows[0] ?? null;
    },
    /** Locks the host's row for a change read from its current state. */
    async findForUpdate(q: Queryable, tenantId: string, name: string): Promise<GitHostRow | null> {
      return (await q.query<GitHostRow>(`select ${HOST} from git_hosts h where h.tenant_id = $1 and h.name = $2 for update`, [tenantId, name])).rows[0] ?? null;
    },
    /** Writes the fields given (undefined: unchanged; null clears the nullable ones). Null when the host is gone. */
    async update(q: Queryable, tenantId: string, name: string, p: GitHostPatch): Promise<GitHostRow | null> {
      const columns: Record<keyof GitHostPatch, string> = {
        baseUrl: 'base_url', username: 'username', credentialKind: 'credential_kind', secretSealed: 'secret_sealed', app: 'app', oauth: 'oauth',
        oauthSecretSealed: 'oauth_secret_sealed', userConnections: 'user_connections', access: 'access', protectedRefs: 'protected_refs',
        protectDefault: 'protect_default', branchPrefix: 'branch_prefix', pushOptions: 'push_options',
      };
      const sets: string[] = [];
      const values: unknown[] = [tenantId, name];
      for (const [key, column] of Object.entries(columns) as Array<[keyof GitHostPatch, string]>) {
        const v = p[key];
        if (v === undefined) continue;
        values.push(v !== null && (key === 'access' || key === 'app' || key === 'oauth') ? JSON.stringify(v) : v);
        sets.push(`${column} = $${values.length}`);
      }
      const { rows } = await q.query<GitHostRow>(`update git_hosts h set ${[...sets, 'updated_at = now()'].join(', ')} where h.tenant_id = $1 and h.name = $2 returning ${HOST}`, values);
      return rows[0] ?? null;
    },
    /** False when there was no such host. */
    async remove(q: Queryable, tenantId: string, name: string): Promise<boolean> {
      const { rowCount } = await q.query(`delete from git_hosts where tenant_id = $1 and name = $2`, [tenantId, name]);
      return (rowCount ?? 0) > 0;
    },
  };
}

export type GitHostsRepo = ReturnType<typeof createGitHostsRepo>;
