import { useState } from 'preact/hooks';
import { api } from '../api';
import { useLoad } from '../use-load';
import { changer, ErrorNote, FieldError, FormError, useRefusal, when } from '../components';
import type { PersonalToken } from '../wire';

type Scope = 'read' | 'sessions' | 'memories' | 'admin';

const SCOPE_TEXT: Record<Scope, string> = {
  read: 'Read: GET requests only, everything you can read',
  sessions: 'Sessions: start sessions, send prompts, run plans',
  memories: 'Memories: write and delete memories',
  admin: 'Admin: what your roles let you administer',
};

/**
 * A person's API tokens: for scripts and cron, acting as them with at most what they hold.
 * The value is shown once, right after creation; afterwards only its first characters.
 */
export function TokensScreen() {
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<Scope[]>(['read']);
  const [days, setDays] = useState(30);
  const [created, setCreated] = useState<{ name: string; value: string } | null>(null);
  const [copied, setCopied] = useState(false);

  const loaded = useLoad(() =>
    api<{ tokens: PersonalToken[]; maxDays: number; scopes: Array<{ scope: Scope; held: boolean }> }>('GET', '/me/tokens').then((r) => {
      setDays((d) => Math.min(d, r.maxDays));
      return r;
    }),
  );
  const { error, setError, reload: load } = loaded;
  const tokens = loaded.data?.tokens ?? null;
  const maxDays = loaded.data?.maxDays ?? 90;
  const held = loaded.data?.scopes ?? [];
  const run = changer(load, setError);
  const refusal = useRefusal(['name', 'scopes', 'expiresInDays']);

  const create = (e: Event) => {
    e.preventDefault();
    setCopied(false);
    void refusal.run(async () => {
      const r = await api<{ token: PersonalToken; value: string }>('POST', '/me/tokens', { name: name.trim(), scopes, expiresInDays: days });
      setCreated({ name: r.token.name, value: r.value });
      setName('');
      await load();
    });
  };
  const toggle = (scope: Scope, on: boolean) => setScopes((s) => (on ? [...s, scope] : s.filter((x) => x !== scope)));
  const copy = async () => {
    if (!created) return;
    await navigator.clipboard.writeText(created.value).then(() => setCopied(true), () => setError('Could not copy: select the token and copy it yourself.'));
  };
  const revoke = (t: PersonalToken) => {
    if (!confirm(`Revoke "${t.name}"? Scripts using it stop working at once.`)) return;
    void run(() => api('DELETE', `/me/tokens/${t.id}`));
  };

  return (
    <section class="tokens">
      <h1>API tokens</h1>
      <p class="hint">
        A token lets a script call the API as you, with at most what your roles allow now (if your roles change, so does the token) and only within its scopes. Tokens
        expire after at most {maxDays} days.
      </p>
      <ErrorNote error={error} onClose={() => setError(null)} />
      {created ? (
        <div class="notice" role="status" data-testid="new-token">
          <p>
            Your new token <strong>{created.name}</strong>. Copy it now: it is not shown again.
          </p>
          <code class="secret" data-testid="token-value">
            {created.value}
          </code>{' '}
          <button type="button" onClick={() => void copy()}>
            {copied ? 'Copied' : 'Copy'}
          </button>{' '}
          <button type="button" onClick={() => setCreated(null)}>
            Done
          </button>
        </div>
      ) : null}
      <form class="card" onSubmit={create} aria-label="New token">
        <label>
          Name <input name="name" value={name} required maxLength={100} placeholder="nightly report" aria-invalid={refusal.at('name') ? true : undefined} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
          <FieldError message={refusal.at('name')} />
        </label>
        <fieldset>
          <legend>Scopes</legend>
          {held
            .filter((h) => h.held)
            .map((h) => (
              <label key={h.scope}>
                <input type="checkbox" name={h.scope} checked={scopes.includes(h.scope)} onChange={(e) => toggle(h.scope, (e.target as HTMLInputElement).checked)} /> {SCOPE_TEXT[h.scope]}
              </label>
            ))}
          <FieldError message={refusal.at('scopes')} />
        </fieldset>
        <label>
          Expires in (days, at most {maxDays}){' '}
          <input type="number" name="days" min={1} max={maxDays} value={days} required aria-invalid={refusal.at('expiresInDays') ? true : undefined} onInput={(e) => setDays(Number((e.target as HTMLInputElement).value))} />
          <FieldError message={refusal.at('expiresInDays')} />
        </label>
        <FormError message={refusal.general} />
        <button type="submit" class="primary" disabled={!name.trim() || !scopes.length}>
          Create token
        </button>
      </form>
      {tokens?.length === 0 ? <p class="empty">No tokens yet.</p> : null}
      <ul class="list" aria-label="Tokens">
        {tokens?.map((t) => (
          <li key={t.id} data-testid="token">
            <span class="grow">
              <strong>{t.name}</strong> <small class="tag">{t.status}</small> <code>{t.prefix}…</code>
              <br />
              <small>
                {[t.scopes.join(', '), `created ${when(t.createdAt)}`, t.lastUsedAt ? `last used ${when(t.lastUsedAt)}` : 'never used', `${t.status === 'expired' ? 'expired' : 'expires'} ${when(t.expiresAt)}`].join(' · ')}
              </small>
            </span>
            {t.status === 'active' ? (
              <button type="button" class="danger" onClick={() => revoke(t)}>
                Revoke
              </button>
            ) : null}
          </li>
        ))}
      </ul>
    </section>
  );
}
