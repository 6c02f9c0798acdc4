import { useEffect, useState } from 'preact/hooks';
import { api, explain } from '../api';
import { ErrorNote } from '../components';
import { FieldError, useRefusal } from './admin-fields';

interface AccessRule {
  who: string;
  repos: string[];
}
interface GitHost {
  name: string;
  baseUrl: string;
  username: string | null;
  access: AccessRule[];
  protectedRefs: string[];
  protectDefault: boolean;
  branchPrefix: string;
}

/** Access rules as one line each: `role:member=org/*,org/api`. */
const accessText = (rules: AccessRule[]) => rules.map((r) => `${r.who}=${r.repos.join(',')}`).join('\n');
const parseAccess = (text: string): AccessRule[] =>
  text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => {
      const eq = l.lastIndexOf('=');
      return { who: eq > 0 ? l.slice(0, eq).trim() : l, repos: eq > 0 ? l.slice(eq + 1).split(',').map((p) => p.trim()).filter(Boolean) : [] };
    });
const lines = (text: string) => text.split('\n').map((l) => l.trim()).filter(Boolean);

/**
 * Git hosts (issue 28): where agents clone and push through the git gateway. The token goes to the API
 * once and is stored sealed; it is never shown again (a new one replaces it).
 */
export function GitHostsTab() {
  const [hosts, setHosts] = useState<GitHost[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () => api<{ gitHosts: GitHost[] }>('GET', '/admin/connectors/git').then((r) => setHosts(r.gitHosts), (err) => setError(explain(err)));
  useEffect(() => {
    void load();
  }, []);
  return (
    <div>
      <ErrorNote error={error} onClose={() => setError(null)} />
      <p class="hint">
        Agents clone <code>&lt;base URL&gt;/&lt;owner&gt;/&lt;repo&gt;</code> as usual; the gateway checks who may reach the repository, adds the token (it never enters a sandbox) and refuses pushes
        outside the user's branch prefix or to protected refs.
      </p>
      <GitHostForm onSaved={load} />
      {hosts?.length === 0 ? <p class="empty">No git hosts yet: agents reach only public repositories.</p> : null}
      {hosts?.map((h) => <GitHostForm key={h.name} host={h} onSaved={load} />)}
    </div>
  );
}

/** A new host (no `host`), or an existing one's settings with Save and Remove. */
function GitHostForm(props: { host?: GitHost; onSaved: () => Promise<unknown> }) {
  const h = props.host;
  const blank = { name: '', baseUrl: '', username: '', token: '', access: '', protectedRefs: 'refs/heads/main\nrefs/heads/master', protectDefault: true, branchPrefix: 'agent/{handle}/' };
  const initial = h ? { name: h.name, baseUrl: h.baseUrl, username: h.username ?? '', token: '', access: accessText(h.access), protectedRefs: h.protectedRefs.join('\n'), protectDefault: h.protectDefault, branchPrefix: h.branchPrefix } : blank;
  const [open, setOpen] = useState(Boolean(h));
  const [form, setForm] = useState(initial);
  const refusal = useRefusal(['name', 'baseUrl', 'username', 'token', 'access', 'protectedRefs', 'branchPrefix']);
  if (!open) {
    return (
      <button type="button" class="primary" onClick={() => setOpen(true)}>
        New git host
      </button>
    );
  }
  const set = (name: keyof typeof form) => (e: { currentTarget: HTMLInputElement | HTMLTextAreaElement }) => setForm({ ...form, [name]: e.currentTarget.value });
  const save = async (e: Event) => {
    e.preventDefault();
    const body: Record<string, unknown> = {
      baseUrl: form.baseUrl.trim(),
      username: form.username.trim(),
      access: parseAccess(form.access),
      protectedRefs: lines(form.protectedRefs),
      protectDefault: form.protectDefault,
      branchPrefix: form.branchPrefix.trim(),
    };
    if (form.token) body.token = form.token;
    const ok = await refusal.run(() => (h ? api('PATCH', `/admin/connectors/git/${encodeURIComponent(h.name)}`, body) : api('POST', '/admin/connectors/git', { ...body, name: form.name.trim() })));
    if (!ok) return;
    setForm(h ? { ...form, token: '' } : blank);
    if (!h) setOpen(false);
    await props.onSaved();
  };
  const remove = async () => {
    if (!h || !confirm(`Remove git host ${h.name} and its token?`)) return;
    if (await refusal.run(() => api('DELETE', `/admin/connectors/git/${encodeURIComponent(h.name)}`))) await props.onSaved();
  };
  return (
    <form class="setup-form" aria-label={h ? `Git host ${h.name}` : 'New git host'} onSubmit={save}>
      {h ? <h3>{h.name}</h3> : null}
      <div class="row">
        {h ? null : (
          <label>
            Name
            <input name="name" value={form.name} required maxLength={40} onInput={set('name')} placeholder="github" />
            <FieldError message={refusal.at('name')} />
          </label>
        )}
        <label>
          Base URL
          <input name="baseUrl" value={form.baseUrl} required maxLength={2000} onInput={set('baseUrl')} placeholder="https://github.com" />
          <FieldError message={refusal.at('baseUrl')} />
        </label>
        <label>
          User name
          <input name="username" value={form.username} maxLength={200} onInput={set('username')} placeholder="x-access-token" />
          <FieldError message={refusal.at('username')} />
        </label>
        <label>
          {h ? 'New token (leave empty to keep it)' : 'Token'}
          <input name="token" type="password" autocomplete="off" value={form.token} required={!h} onInput={set('token')} />
          <FieldError message={refusal.at('token')} />
        </label>
      </div>
      <div class="row">
        <label>
          Access (one rule a line: role:&lt;name&gt;, team:&lt;name&gt; or * = patterns)
          <textarea name="access" rows={3} value={form.access} onInput={set('access')} placeholder="role:member=acme/*" />
          <FieldError message={refusal.at('access')} />
        </label>
        <label>
          Protected refs (one a line)
          <textarea name="protectedRefs" rows={3} value={form.protectedRefs} onInput={set('protectedRefs')} />
          <FieldError message={refusal.at('protectedRefs')} />
        </label>
      </div>
      <div class="row">
        <label>
          Agents push under
          <input name="branchPrefix" value={form.branchPrefix} maxLength={200} onInput={set('branchPrefix')} />
          <FieldError message={refusal.at('branchPrefix')} />
        </label>
        <label>
          <input name="protectDefault" type="checkbox" checked={form.protectDefault} onChange={(e) => setForm({ ...form, protectDefault: e.currentTarget.checked })} /> Protect the host's default branch
        </label>
      </div>
      <ErrorNote error={refusal.general} onClose={refusal.clear} />
      <div class="row">
        <button type="submit" class="primary">
          {h ? 'Save' : 'Add git host'}
        </button>
        {h ? (
          <button type="button" class="danger" onClick={remove}>
            Remove
          </button>
        ) : (
          <button type="button" onClick={() => setOpen(false)}>
            Cancel
          </button>
        )}
      </div>
    </form>
  );
}
