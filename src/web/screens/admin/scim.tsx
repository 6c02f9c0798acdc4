import { useState } from 'preact/hooks';
import { api } from '../../api';
import { useLoad } from '../../use-load';
import { changer, ErrorNote, FieldError, FormError, usePersonNames, useRefusal, when } from '../../components';

/** A SCIM token as GET /v1/admin/scim/tokens lists it (its schema, in scim.routes.ts, sits among routes the dashboard's compiler does not read). */
interface ScimToken {
  id: string;
  name: string;
  createdBy: string;
  createdAt: string;
  lastUsedAt: string | null;
  expiresAt: string;
  expired: boolean;
}

/** The defaults the API applies (scim-fns.ts): a token's lifetime, and the tenant maximum when unset. */
const DEFAULT_DAYS = 180;
const DEFAULT_MAX_DAYS = 365;

/**
 * The tenant's SCIM tokens, on the Sign-in tab (owners: only they mint them): when each
 * expires, who minted it, its last use; a new one (or the same name again, which renews it) is shown
 * once. Expired tokens stay listed, so an owner sees why provisioning stopped.
 */
export function ScimTokensPanel(props: { canUsers?: boolean }) {
  const [name, setName] = useState('default');
  const [days, setDays] = useState(DEFAULT_DAYS);
  const [created, setCreated] = useState<{ name: string; token: string; expiresAt: string; replaced: boolean } | null>(null);

  const loaded = useLoad(async () => {
    const [list, tenant] = await Promise.all([api<{ tokens: ScimToken[] }>('GET', '/admin/scim/tokens'), api<{ tenant: { settings: { tokens?: { scimMaxDays?: number } } } }>('GET', '/admin/tenant')]);
    const maxDays = tenant.tenant.settings.tokens?.scimMaxDays ?? DEFAULT_MAX_DAYS;
    setDays((d) => Math.min(d, maxDays));
    return { tokens: list.tokens, maxDays };
  });
  const { error, setError, reload: load } = loaded;
  const tokens = loaded.data?.tokens ?? null;
  const maxDays = loaded.data?.maxDays ?? DEFAULT_MAX_DAYS;
  const run = changer(load, setError);

  const refusal = useRefusal(['name', 'expiresInDays']);
  const personName = usePersonNames(props.canUsers !== false);
  const create = (e: Event) => {
    e.preventDefault();
    void refusal.run(async () => {
      const r = await api<{ name: string; token: string; expiresAt: string; replaced: boolean }>('POST', '/admin/scim/tokens', { name: name.trim(), expiresInDays: days });
      setCreated(r);
      await load();
    });
  };
  const revoke = (t: ScimToken) => {
    if (!confirm(`Revoke the SCIM token "${t.name}"? Its identity provider is refused at once.`)) return;
    void run(() => api('DELETE', `/admin/scim/tokens/${encodeURIComponent(t.name)}`));
  };

  return (
    <section aria-label="SCIM tokens">
      <h2>SCIM tokens</h2>
      <p class="hint">
        Your identity provider (Entra ID, Okta) provisions and deprovisions people and teams with a SCIM token, at <code>{location.origin}/scim/v2</code>. It cannot deactivate, delete or rename an owner. Every token
        expires (at most {maxDays} days); to renew one, create it again under its name: the identity provider then needs the new value, and the old one stops at once.
      </p>
      <ErrorNote error={error} onClose={() => setError(null)} />
      {created ? (
        <div class="notice" role="status" data-testid="new-scim-token">
          <p>
            SCIM token <strong>{created.name}</strong> {created.replaced ? 'renewed' : 'created'}, expires {when(created.expiresAt)}. Enter it in the identity provider now: it is not shown again.
          </p>
          <code class="secret" data-testid="scim-token-value">
            {created.token}
          </code>{' '}
          <button type="button" onClick={() => setCreated(null)}>
            Done
          </button>
        </div>
      ) : null}
      <form class="card" aria-label="New SCIM token" onSubmit={create}>
        <label>
          Name <input name="scimName" value={name} required pattern="[a-z0-9][a-z0-9._\-]{0,62}" title="lower-case letters, digits, dots, dashes and underscores" aria-invalid={refusal.at('name') ? true : undefined} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
          <FieldError message={refusal.at('name')} />
        </label>
        <label>
          Expires in (days, at most {maxDays}){' '}
          <input type="number" name="scimDays" min={1} max={maxDays} value={days} required aria-invalid={refusal.at('expiresInDays') ? true : undefined} onInput={(e) => setDays(Number((e.target as HTMLInputElement).value))} />
          <FieldError message={refusal.at('expiresInDays')} />
        </label>
        <FormError message={refusal.general} />
        <button type="submit" class="primary">
          Create or renew SCIM token
        </button>
      </form>
      {tokens?.length === 0 ? <p class="empty">No SCIM tokens.</p> : null}
      <ul class="list" aria-label="SCIM tokens">
        {tokens?.map((t) => (
          <li key={t.id} data-testid={`scim-token-${t.name}`}>
            <span class="grow">
              <strong>{t.name}</strong> <small class="tag">{t.expired ? 'expired' : 'active'}</small>
              <br />
              <small>{[`${t.expired ? 'expired' : 'expires'} ${when(t.expiresAt)}`, `created ${when(t.createdAt)} by ${personName(t.createdBy)}`, t.lastUsedAt ? `last used ${when(t.lastUsedAt)}` : 'never used'].join(' · ')}</small>
            </span>
            <button type="button" class="danger" onClick={() => revoke(t)}>
              Revoke
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}
