import { useState } from 'preact/hooks';
import { api, explain } from '../../api';
import { useLoad } from '../../use-load';
import { ErrorNote, when } from '../../components';
import { FieldError, useRefusal } from './fields';
import { CodeHostPanel } from './code-host';
import { AccessSyntaxError, formatGitAccessRule, parseGitAccessRule } from '../../../lib/access-grammar';
import type { AccessRule, CredentialKind, UserConnections, GitHost } from '../../wire';
import type { HostConnection as Connection } from '../../wire';

const lines = (text: string) => text.split('\n').map((l) => l.trim()).filter(Boolean);
/** Access rules as one line each, in the CLI's grammar (`role:member=org/*,org/api`: lib/access-grammar.ts). */
const accessText = (rules: AccessRule[]) => rules.map(formatGitAccessRule).join('\n');
/** The rules of the text, one a line; a line that is no rule throws AccessSyntaxError (the CLI refuses it too). */
const parseAccess = (text: string): AccessRule[] => lines(text).map(parseGitAccessRule);

/** Where a host sends people back after they allow a connection: registered with the host's OAuth client. */
const callbackUrl = () => `${location.origin}/v1/connections/git/callback`;
const PRESETS: Array<[string, string]> = [
  ['', 'None'],
  ['github', 'GitHub'],
  ['gitlab', 'GitLab'],
  ['gitea', 'Gitea or Forgejo'],
  ['custom', 'Other (endpoints below)'],
];

/**
 * Git hosts: where agents clone and push through the git gateway. The service credential (a
 * token or a GitHub App's private key) and the OAuth client's secret go to the API once and are stored
 * sealed; they are never shown again (a new one replaces them).
 */
export function GitHostsTab() {
  const { data: hosts, error, setError, reload: load } = useLoad(() => api<{ gitHosts: GitHost[] }>('GET', '/admin/connectors/git').then((r) => r.gitHosts));
  return (
    <div>
      <ErrorNote error={error} onClose={() => setError(null)} />
      <p class="hint">
        Agents clone <code>&lt;base URL&gt;/&lt;owner&gt;/&lt;repo&gt;</code> as usual; the gateway checks who may reach the repository, adds the token (it never enters a sandbox) and refuses pushes
        outside the user's branch prefix, to protected refs, or with push options not listed below.
      </p>
      <GitHostForm onSaved={load} />
      {hosts?.length === 0 ? <p class="empty">No git hosts yet: agents reach only public repositories.</p> : null}
      {hosts?.map((h) => (
        <div key={h.name}>
          <GitHostForm host={h} onSaved={load} />
          <CodeHostPanel host={h} />
        </div>
      ))}
    </div>
  );
}

/** A new host (no `host`), or an existing one's settings with Save and Remove. */
function GitHostForm(props: { host?: GitHost; onSaved: () => Promise<unknown> }) {
  const h = props.host;
  const secrets = { token: '', privateKey: '', clientSecret: '' };
  const blank = {
    name: '', baseUrl: '', username: '', credentialKind: 'token' as CredentialKind, ...secrets, appId: '', installationId: '', apiUrl: '',
    // An existing client shows as "custom": its endpoints as stored, whichever preset filled them.
    oauthPreset: '', clientId: '', authorizeUrl: '', tokenUrl: '', userUrl: '', scopes: '', userConnections: 'off' as UserConnections,
    access: '', protectedRefs: 'refs/heads/main\nrefs/heads/master', protectDefault: true, branchPrefix: 'agent/{handle}/', pushOptions: '',
  };
  const initial = h
    ? {
        ...blank, name: h.name, baseUrl: h.baseUrl, username: h.username ?? '', credentialKind: h.credentialKind,
        appId: h.githubApp?.appId ?? '', installationId: h.githubApp?.installationId ?? '', apiUrl: h.githubApp?.apiUrl ?? '',
        oauthPreset: h.oauth ? 'custom' : '', clientId: h.oauth?.clientId ?? '', authorizeUrl: h.oauth?.authorizeUrl ?? '', tokenUrl: h.oauth?.tokenUrl ?? '', userUrl: h.oauth?.userUrl ?? '', scopes: h.oauth?.scopes ?? '',
        userConnections: h.userConnections, access: accessText(h.access), protectedRefs: h.protectedRefs.join('\n'), protectDefault: h.protectDefault, branchPrefix: h.branchPrefix,
        pushOptions: h.pushOptions.join('\n'),
      }
    : blank;
  const [open, setOpen] = useState(Boolean(h));
  const [form, setForm] = useState(initial);
  const refusal = useRefusal(['name', 'baseUrl', 'username', 'credentialKind', 'token', 'githubApp', 'oauth', 'userConnections', 'access', 'protectedRefs', 'branchPrefix', 'pushOptions']);
  if (!open) {
    return (
      <button type="button" class="primary" onClick={() => setOpen(true)}>
        New git host
      </button>
    );
  }
  const set = (name: keyof typeof form) => (e: { currentTarget: HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement }) => setForm({ ...form, [name]: e.currentTarget.value });
  // A token is kept when the host already has one; any other way to it needs one.
  const hasToken = h?.credentialKind === 'token';
  const save = async (e: Event) => {
    e.preventDefault();
    let access: AccessRule[];
    try {
      access = parseAccess(form.access);
    } catch (err) {
      if (!(err instanceof AccessSyntaxError)) throw err;
      refusal.say(`Access: ${err.message}`, 'access');
      return;
    }
    const body: Record<string, unknown> = {
      baseUrl: form.baseUrl.trim(),
      username: form.username.trim(),
      access,
      protectedRefs: lines(form.protectedRefs),
      protectDefault: form.protectDefault,
      branchPrefix: form.branchPrefix.trim(),
      pushOptions: lines(form.pushOptions),
    };
    body.credentialKind = form.credentialKind;
    if (form.credentialKind === 'token' && form.token) body.token = form.token;
    if (form.credentialKind === 'github_app') {
      body.githubApp = { appId: form.appId.trim(), installationId: form.installationId.trim(), ...(form.privateKey.trim() ? { privateKey: form.privateKey } : {}), ...(form.apiUrl.trim() ? { apiUrl: form.apiUrl.trim() } : {}) };
    }
    if (form.oauthPreset) {
      const custom = form.oauthPreset === 'custom';
      body.oauth = {
        clientId: form.clientId.trim(),
        ...(form.clientSecret ? { clientSecret: form.clientSecret } : {}),
        ...(custom ? { authorizeUrl: form.authorizeUrl.trim(), tokenUrl: form.tokenUrl.trim(), userUrl: form.userUrl.trim() } : { preset: form.oauthPreset }),
        // Empty with a preset: the preset's scopes.
        ...(custom || form.scopes.trim() ? { scopes: form.scopes.trim() } : {}),
      };
    } else if (h?.oauth) body.oauth = null;
    body.userConnections = form.userConnections;
    const ok = await refusal.run(() => (h ? api('PATCH', `/admin/connectors/git/${encodeURIComponent(h.name)}`, body) : api('POST', '/admin/connectors/git', { ...body, name: form.name.trim() })));
    if (!ok) return;
    setForm(h ? { ...form, ...secrets } : blank);
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
      </div>
      <fieldset>
        <legend>Service credential</legend>
        <div class="row">
          <label>
            Agents reach it with
            <select name="credentialKind" value={form.credentialKind} onChange={set('credentialKind')}>
              <option value="token">A token</option>
              <option value="github_app">A GitHub App installation</option>
              <option value="none">Nothing shared: each person's own account</option>
            </select>
            <FieldError message={refusal.at('credentialKind')} />
          </label>
          {form.credentialKind === 'token' ? (
            <label>
              {hasToken ? 'New token (leave empty to keep it)' : 'Token'}
              <input name="token" type="password" autocomplete="off" value={form.token} required={!hasToken} onInput={set('token')} />
              <FieldError message={refusal.at('token')} />
            </label>
          ) : null}
        </div>
        {form.credentialKind === 'github_app' ? (
          <div class="row">
            <label>
              App id
              <input name="appId" value={form.appId} required maxLength={100} onInput={set('appId')} placeholder="123456" />
              <FieldError message={refusal.at('githubApp.appId')} />
            </label>
            <label>
              Installation id
              <input name="installationId" value={form.installationId} required maxLength={100} onInput={set('installationId')} placeholder="7890123" />
              <FieldError message={refusal.at('githubApp.installationId')} />
            </label>
            <label>
              {h?.credentialKind === 'github_app' ? 'New private key (leave empty to keep it)' : 'Private key (the .pem file GitHub gave)'}
              <textarea name="privateKey" rows={3} autocomplete="off" value={form.privateKey} onInput={set('privateKey')} placeholder="-----BEGIN RSA PRIVATE KEY-----" />
              <FieldError message={refusal.at('githubApp.privateKey')} />
            </label>
            <label>
              API URL (optional)
              <input name="apiUrl" value={form.apiUrl} maxLength={2000} onInput={set('apiUrl')} placeholder="https://api.github.com" />
              <FieldError message={refusal.at('githubApp.apiUrl')} />
            </label>
            <FieldError message={refusal.only('githubApp')} />
          </div>
        ) : null}
      </fieldset>
      <fieldset>
        <legend>Personal connections</legend>
        <p class="hint">People connect their own account at the host (Connections in the dashboard); their agents then act as them there, with their account's rights.</p>
        <div class="row">
          <label>
            People's own accounts
            <select name="userConnections" value={form.userConnections} onChange={set('userConnections')}>
              <option value="off">Off: the service credential only</option>
              <option value="optional">Optional: theirs when connected, else the service credential</option>
              <option value="required">Required: theirs only</option>
            </select>
            <FieldError message={refusal.at('userConnections')} />
          </label>
          <label>
            OAuth client
            <select name="oauthPreset" value={form.oauthPreset} onChange={set('oauthPreset')}>
              {PRESETS.map(([v, label]) => (
                <option value={v}>{label}</option>
              ))}
            </select>
            <FieldError message={refusal.only('oauth') ?? refusal.at('oauth.preset')} />
          </label>
        </div>
        {form.oauthPreset ? (
          <>
            <p class="hint">
              Register this callback URL with the OAuth application at the host: <code data-testid="callback-url">{callbackUrl()}</code>
            </p>
            <div class="row">
              <label>
                Client id
                <input name="clientId" value={form.clientId} required maxLength={100} onInput={set('clientId')} />
                <FieldError message={refusal.at('oauth.clientId')} />
              </label>
              <label>
                {h?.oauth ? 'New client secret (leave empty to keep it)' : 'Client secret'}
                <input name="clientSecret" type="password" autocomplete="off" value={form.clientSecret} onInput={set('clientSecret')} />
                <FieldError message={refusal.at('oauth.clientSecret')} />
              </label>
              <label>
                Scopes{form.oauthPreset === 'custom' ? '' : " (empty: the preset's)"}
                <input name="scopes" value={form.scopes} maxLength={500} onInput={set('scopes')} placeholder={form.oauthPreset === 'github' ? 'repo' : ''} />
                <FieldError message={refusal.at('oauth.scopes')} />
              </label>
            </div>
            {form.oauthPreset === 'custom' ? (
              <div class="row">
                <label>
                  Authorization URL
                  <input name="authorizeUrl" value={form.authorizeUrl} required maxLength={2000} onInput={set('authorizeUrl')} />
                  <FieldError message={refusal.at('oauth.authorizeUrl')} />
                </label>
                <label>
                  Token URL
                  <input name="tokenUrl" value={form.tokenUrl} required maxLength={2000} onInput={set('tokenUrl')} />
                  <FieldError message={refusal.at('oauth.tokenUrl')} />
                </label>
                <label>
                  User API URL (names the account)
                  <input name="userUrl" value={form.userUrl} maxLength={2000} onInput={set('userUrl')} />
                  <FieldError message={refusal.at('oauth.userUrl')} />
                </label>
              </div>
            ) : null}
          </>
        ) : null}
        {h && (h.userConnections !== 'off' || h.connections) ? <HostConnections host={h} onChanged={props.onSaved} /> : null}
      </fieldset>
      <div class="row">
        <label>
          Access (one rule a line, <code>&lt;who&gt;=&lt;pattern&gt;,&lt;pattern&gt;</code>: who is role:&lt;name&gt;, team:&lt;name&gt; or *)
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
      <label>
        Push options agents may send with <code>git push -o</code> (one a line: a key such as <code>merge_request.create</code>, a prefix such as <code>merge_request.*</code>, or <code>key=value</code>;
        empty: a push carrying any is refused)
        <textarea name="pushOptions" rows={2} value={form.pushOptions} onInput={set('pushOptions')} placeholder="merge_request.create" />
        <FieldError message={refusal.at('pushOptions')} />
      </label>
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

/** Who has connected their own account to a host, each with a Disconnect for admins (someone left, an account was compromised). */
function HostConnections(props: { host: GitHost; onChanged: () => Promise<unknown> }) {
  const { host } = props;
  const path = `/admin/connectors/git/${encodeURIComponent(host.name)}/connections`;
  const { data: people, error, setError } = useLoad(() => (host.connections ? api<{ connections: Connection[] }>('GET', path).then((r) => r.connections) : Promise.resolve([])), [host.name, host.connections]);
  const disconnect = async (c: Connection) => {
    if (!confirm(`Disconnect ${c.email}'s account from ${host.name}?`)) return;
    try {
      await api('DELETE', `${path}/${c.userId}`);
      await props.onChanged();
    } catch (err) {
      setError(explain(err));
    }
  };
  return (
    <div>
      <p>
        {host.connections} {host.connections === 1 ? 'person has' : 'people have'} connected their own account.
      </p>
      <ErrorNote error={error} onClose={() => setError(null)} />
      {people?.length ? (
        <ul class="list" aria-label={`Connections to ${host.name}`}>
          {people.map((c) => (
            <li key={c.userId}>
              <span class="grow">
                {c.handle} <small>{c.email}</small> as <strong>{c.account ?? '?'}</strong>
                <br />
                <small>
                  since {when(c.connectedAt)}
                  {c.expiresAt ? ` · access token valid until ${when(c.expiresAt)}` : ''}
                </small>
              </span>
              <button type="button" class="link danger" onClick={() => void disconnect(c)}>
                Disconnect
              </button>
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}
