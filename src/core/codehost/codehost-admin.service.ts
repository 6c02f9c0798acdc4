import type { Database } from '../../db/database.js';
import type { SecretBox } from '../../lib/secret-box.js';
import { requirePermission } from '../../kernel/authz.js';
import type { Ctx } from '../../kernel/context.js';
import { checkedField, ConflictError, NotFoundError, UnavailableError, ValidationError } from '../../kernel/errors.js';
import type { AuditService } from '../audit/audit.service.js';
import { checkKind, checkLabel, checkMention, checkRepos, newHookId, newWebhookSecret, webhookUrl } from './codehost-admin-fns.js';
import type { CodeHostAdminRepo, WebhookPatch, WebhookRow } from './codehost-admin.repo.js';
import type { CodeHostDeliveriesRepo, LoggedDelivery } from './codehost-deliveries.repo.js';
import { AUDIT, type CodeHostKind } from './codehost-contract.js';

/** A host's webhook as admins see it: never its secret, only whether one is set. */
export interface PublicWebhook {
  host: string;
  kind: CodeHostKind | null;
  webhookUrl: string | null;
  enabled: boolean;
  secretSet: boolean;
  mention: string;
  label: string;
  repos: string[];
}

/** What the intake (codehost-intake.service.ts) offers the admin side: a signed test delivery, and forgetting a host it cached. */
export interface IntakeForAdmin {
  testDelivery(tenantId: string, hostId: string): Promise<{ outcome: string; deliveryId: string }>;
  forget(hookId: string): void;
}

export interface WebhookSettings {
  kind?: CodeHostKind;
  mention?: string;
  label?: string;
  repos?: string[];
  enabled?: boolean;
}

export const DELIVERIES_LIMIT_MAX = 200;

/**
 * The webhook of each git host: an admin with admin.manage_providers (the permission that
 * governs the host and its sealed credentials) turns it on, which generates the secret the host signs its
 * deliveries with (shown once, stored sealed), sets the mention, label and repositories that trigger a
 * run, reads the log of deliveries and sends a signed test delivery through the intake.
 */
export function createCodeHostAdmin(deps: { db: Database; repo: CodeHostAdminRepo; deliveries: Pick<CodeHostDeliveriesRepo, 'log'>; audit: AuditService; box: SecretBox; publicUrl: string; intake?: IntakeForAdmin }) {
  const { db, repo, audit, box } = deps;
  const access = (ctx: Ctx) => requirePermission(ctx, 'admin.manage_providers');
  const notFound = (name: string) => new NotFoundError(`git host "${name}" not found`, { hint: 'List them with `npx aws connector git list`.' });
  const view = (w: WebhookRow): PublicWebhook => ({
    host: w.name,
    kind: w.kind,
    webhookUrl: w.webhookId ? webhookUrl(deps.publicUrl, w.webhookId) : null,
    enabled: w.enabled,
    secretSet: w.secretSealed !== null,
    mention: w.mention,
    label: w.label,
    repos: w.repos,
  });
  const load = async (tenantId: string, name: string) => {
    const w = await repo.find(db, tenantId, name);
    if (!w) throw notFound(name);
    return w;
  };
  /** The intake caches hosts by their hook id for a few seconds: a changed secret or switch must apply to the next delivery. */
  const forget = (hookId: string | null) => {
    if (hookId) deps.intake?.forget(hookId);
  };

  return {
    /** A host's webhook settings. */
    async get(ctx: Ctx, name: string): Promise<PublicWebhook> {
      return view(await load(access(ctx), name));
    },

    /**
     * Generates the webhook's secret (the first time also its URL, and turns it on), or a new one: the
     * URL stays, the old secret stops verifying at once. The only time the secret is returned.
     */
    async rotateSecret(ctx: Ctx, name: string, input: { kind?: CodeHostKind } = {}): Promise<PublicWebhook & { webhookUrl: string; secret: string }> {
      const tenantId = access(ctx);
      const kind = input.kind === undefined ? undefined : checkedField('kind', () => checkKind(input.kind));
      const secret = newWebhookSecret();
      const out = await db.transaction(async (tx) => {
        const current = await repo.findForUpdate(tx, tenantId, name);
        if (!current) throw notFound(name);
        if (!kind && !current.kind) throw new ValidationError('kind is needed the first time: github, gitlab or gitea (how the host signs its deliveries)', { details: { field: 'kind' } });
        const first = current.secretSealed === null;
        const patch: WebhookPatch = { secretSealed: box.seal(secret), webhookId: current.webhookId ?? newHookId(), ...(kind ? { kind } : {}), ...(first ? { enabled: true } : {}) };
        const w = (await repo.update(tx, tenantId, current.hostId, patch))!;
        await audit.record(tx, ctx, { action: AUDIT.webhookSecret, target: `git_host:${w.name}`, details: { kind: w.kind, rotated: !first, ...(first ? { enabled: true } : {}) } });
        return { ...view(w), webhookUrl: webhookUrl(deps.publicUrl, w.webhookId!), secret, hookId: w.webhookId! };
      });
      forget(out.hookId);
      const { hookId: _, ...shown } = out;
      return shown;
    },

    /** Changes the mention, label, repositories, kind or on/off (only what is given); audited with what changed. */
    async update(ctx: Ctx, name: string, input: WebhookSettings): Promise<PublicWebhook> {
      const tenantId = access(ctx);
      const patch: WebhookPatch = {};
      if (input.kind !== undefined) patch.kind = checkedField('kind', () => checkKind(input.kind));
      if (input.mention !== undefined) patch.mention = checkedField('mention', () => checkMention(input.mention));
      if (input.label !== undefined) patch.label = checkedField('label', () => checkLabel(input.label));
      if (input.repos !== undefined) patch.repos = checkedField('repos', () => checkRepos(input.repos));
      if (input.enabled !== undefined) patch.enabled = input.enabled;
      if (!Object.keys(patch).length) throw new ValidationError('body: give at least one of kind, mention, label, repos, enabled', { details: { field: 'body' } });
      const w = await db.transaction(async (tx) => {
        const current = await repo.findForUpdate(tx, tenantId, name);
        if (!current) throw notFound(name);
        if (patch.enabled && !current.secretSealed) throw new ConflictError('the webhook has no secret yet: generate it first (POST …/webhook/secret with the kind)', { code: 'webhook_no_secret', details: { field: 'enabled' } });
        const updated = (await repo.update(tx, tenantId, current.hostId, patch))!;
        await audit.record(tx, ctx, { action: AUDIT.webhookUpdate, target: `git_host:${updated.name}`, details: { ...patch } });
        return updated;
      });
      forget(w.webhookId);
      return view(w);
    },

    /** The host's latest deliveries with their outcome, newest first. */
    async deliveries(ctx: Ctx, name: string, limit = 50): Promise<LoggedDelivery[]> {
      const w = await load(access(ctx), name);
      return deps.deliveries.log(db, w.tenantId, w.hostId, Math.max(1, Math.min(DELIVERIES_LIMIT_MAX, Math.floor(limit))));
    },

    /**
     * Sends the host's own kind of delivery (a ping, signed with its secret) through the intake, as the
     * host would: its verification and its record are what is tested; nothing runs. Audited.
     */
    async test(ctx: Ctx, name: string): Promise<{ outcome: string; deliveryId: string }> {
      const tenantId = access(ctx);
      const w = await load(tenantId, name);
      if (!w.secretSealed || !w.webhookId) throw new ConflictError('the webhook has no secret yet: generate it first', { code: 'webhook_no_secret' });
      if (!w.enabled) throw new ConflictError('the webhook is off: turn it on to test it (the intake answers 404 to a host whose webhook is off)', { code: 'webhook_off' });
      if (!deps.intake) throw new UnavailableError('the webhook intake is not part of this build');
      const result = await deps.intake.testDelivery(tenantId, w.hostId);
      await db.transaction((tx) => audit.record(tx, ctx, { action: AUDIT.webhookTest, target: `git_host:${w.name}`, details: { outcome: result.outcome, deliveryId: result.deliveryId } }));
      return result;
    },
  };
}
