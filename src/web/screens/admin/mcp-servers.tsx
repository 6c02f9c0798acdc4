import { useState } from 'preact/hooks';
import { api, explain } from '../../api';
import { useLoad } from '../../use-load';
import { ErrorNote, Table } from '../../components';
import { FieldError, useRefusal } from './fields';
import { AccessSyntaxError, formatMcpAccess, parseMcpAccess } from '../../../lib/access-grammar';
import type { McpAccess, McpServerInfo } from '../../wire';

type Kind = 'tools' | 'resources' | 'prompts';

/** The text areas' lines, one a line per role, in the CLI's grammar (`member`, `member=search,get_issue`: lib/access-grammar.ts). */
const accessLines = (access: McpAccess[], kind: Kind) => formatMcpAccess(access, kind).join('\n');
/** Each kind's field (the tools are the `access` text area), and an example of a line of it. */
const FIELDS: Record<Kind, { field: string; label: string; example: string }> = {
  tools: { field: 'access', label: 'Roles', example: 'member=search,get_issue' },
  resources: { field: 'resources', label: 'Resources', example: 'member=docs://handbook/*' },
  prompts: { field: 'prompts', label: 'Prompts', example: 'member=triage' },
};
const lines = (text: string) => text.split('\n').map((l) => l.trim()).filter(Boolean);
/**
 * The three text areas as one access list (a role named in any of them gets an entry, none of a kind it
 * is not named in). A line the CLI would refuse throws AccessSyntaxError, naming its kind.
 */
const parseAccess = (text: Record<Kind, string>): McpAccess[] => parseMcpAccess({ tools: lines(text.tools), resources: lines(text.resources), prompts: lines(text.prompts) });
// Resources and prompts absent: none (the API's default).
const summary = ({ role, tools, resources = [], prompts = [] }: McpAccess) =>
  [
    `${role}: ${tools === '*' ? 'all tools' : tools.join(', ') || 'no tools'}`,
    resources === '*' ? 'all resources' : resources.length ? `resources ${resources.join(', ')}` : '',
    prompts === '*' ? 'all prompts' : prompts.length ? `prompts ${prompts.join(', ')}` : '',
  ]
    .filter(Boolean)
    .join(', ');

const EMPTY = { name: '', url: '', authKind: 'bearer' as McpServerInfo['authKind'], authHeader: '', secret: '', access: '', resources: '', prompts: '' };

/**
 * MCP servers (admin.manage_providers): the tenant's remote MCP servers its agents reach through the
 * gateway host, which adds the server's token (stored sealed, never shown again, never in a sandbox), and
 * which roles may use which of their tools, and apart, resources and prompts (none unless listed). A
 * change reaches idle agents at once, busy ones at their next turn.
 */
export function McpServersTab() {
  /** The form: a new server (editing null) or changes to the named one. */
  const [form, setForm] = useState<typeof EMPTY | null>(null);
  const [editing, setEditing] = useState<string | null>(null);
  const refusal = useRefusal(['name', 'url', 'authKind', 'authHeader', 'secret', 'access', 'resources', 'prompts'], { conflictAt: 'name' });
  const { data: servers, error, setError, reload: load } = useLoad(() => api<{ servers: McpServerInfo[] }>('GET', '/admin/connectors/mcp').then((r) => r.servers));
  if (!servers) return <ErrorNote error={error} />;

  const set = (name: keyof typeof EMPTY) => (e: { currentTarget: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement }) => setForm({ ...form!, [name]: e.currentTarget.value });
  const edit = (s: McpServerInfo) => {
    setEditing(s.name);
    setForm({ name: s.name, url: s.url, authKind: s.authKind, authHeader: s.authHeader ?? '', secret: '', access: accessLines(s.access, 'tools'), resources: accessLines(s.access, 'resources'), prompts: accessLines(s.access, 'prompts') });
    refusal.clear();
  };
  const save = async (e: Event) => {
    e.preventDefault();
    const f = form!;
    const credential = {
      authKind: f.authKind,
      ...(f.authKind === 'header' ? { authHeader: f.authHeader.trim() } : {}),
      // Blank while editing: the stored token stays (it is never shown); switching to none drops it.
      ...(f.secret ? { secret: f.secret } : editing && f.authKind === 'none' ? { secret: null } : {}),
    };
    let access: McpAccess[];
    try {
      access = parseAccess({ tools: f.access, resources: f.resources, prompts: f.prompts });
    } catch (err) {
      if (!(err instanceof AccessSyntaxError) || !err.kind) throw err;
      const { field, label, example } = FIELDS[err.kind];
      refusal.say(`${label}: ${err.message}, e.g. ${example}`, field);
      return;
    }
    const body = { url: f.url.trim(), ...credential, access };
    const ok = await refusal.run(() => (editing ? api('PATCH', `/admin/connectors/mcp/${encodeURIComponent(editing)}`, body) : api('POST', '/admin/connectors/mcp', { name: f.name.trim(), ...body })));
    if (ok) {
      setForm(null);
      setEditing(null);
      await load();
    }
  };
  const toggle = async (s: McpServerInfo) => {
    try {
      await api('PATCH', `/admin/connectors/mcp/${encodeURIComponent(s.name)}`, { enabled: !s.enabled });
      await load();
    } catch (err) {
      setError(explain(err));
    }
  };
  const remove = async (s: McpServerInfo) => {
    if (!confirm(`Remove the MCP server ${s.name} and its token?`)) return;
    try {
      await api('DELETE', `/admin/connectors/mcp/${encodeURIComponent(s.name)}`);
      await load();
    } catch (err) {
      setError(explain(err));
    }
  };

  return (
    <section aria-label="MCP servers">
      <ErrorNote error={error} onClose={() => setError(null)} />
      <p class="hint">
        Remote MCP servers (Streamable HTTP) the agents may use. Agents reach them through the service, which adds the token: the token never enters a sandbox. An agent sees a server only when one of
        its person's roles is listed, and only the tools listed for that role; its tools appear as <code>&lt;server&gt;_&lt;tool&gt;</code>. Its resources and prompts are none unless listed below
        for the role.
      </p>
      {servers.length ? (
        <Table
          items={servers}
          id={(s) => s.name}
          columns={[
            { title: 'Name', cell: (s) => s.name },
            { title: 'URL', cell: (s) => <code>{s.url}</code> },
            { title: 'Credential', cell: (s) => (s.hasSecret ? (s.authKind === 'header' ? `header ${s.authHeader}` : s.authKind) : 'none') },
            { title: 'Roles and tools', cell: (s) => (s.access.length ? s.access.map(summary).join('; ') : 'no role') },
            { title: 'Enabled', cell: (s) => (s.enabled ? 'yes' : 'no') },
            {
              title: '',
              cell: (s) => (
                <>
                  <button type="button" onClick={() => edit(s)}>
                    Edit
                  </button>{' '}
                  <button type="button" onClick={() => toggle(s)}>
                    {s.enabled ? 'Disable' : 'Enable'}
                  </button>{' '}
                  <button type="button" class="danger" onClick={() => remove(s)}>
                    Remove
                  </button>
                </>
              ),
            },
          ]}
        />
      ) : (
        <p class="empty">No MCP servers yet.</p>
      )}
      {!form ? (
        <button type="button" class="primary" onClick={() => (setEditing(null), setForm({ ...EMPTY }), refusal.clear())}>
          New MCP server
        </button>
      ) : (
        <form class="setup-form" aria-label={editing ? `Edit MCP server ${editing}` : 'New MCP server'} onSubmit={save}>
          <div class="row">
            <label>
              Name
              <input name="name" value={form.name} required disabled={Boolean(editing)} maxLength={40} pattern="[a-z][a-z0-9\-]{0,39}" onInput={set('name')} placeholder="tracker" aria-describedby="mcp-name-error" />
              <FieldError id="mcp-name-error" message={refusal.at('name')} />
            </label>
            <label class="grow">
              URL
              <input name="url" value={form.url} required maxLength={2000} onInput={set('url')} placeholder="https://mcp.example.com/mcp" aria-describedby="mcp-url-error" />
              <FieldError id="mcp-url-error" message={refusal.at('url')} />
            </label>
          </div>
          <div class="row">
            <label>
              Credential
              <select name="authKind" value={form.authKind} onChange={set('authKind')}>
                <option value="bearer">Bearer token</option>
                <option value="header">Header</option>
                <option value="none">None</option>
              </select>
            </label>
            {form.authKind === 'header' ? (
              <label>
                Header
                <input name="authHeader" value={form.authHeader} required maxLength={100} onInput={set('authHeader')} placeholder="x-api-key" aria-describedby="mcp-header-error" />
                <FieldError id="mcp-header-error" message={refusal.at('authHeader')} />
              </label>
            ) : null}
            {form.authKind !== 'none' ? (
              <label class="grow">
                {editing ? 'New token (blank: keep the stored one)' : 'Token'}
                <input name="secret" type="password" autocomplete="off" value={form.secret} required={!editing} maxLength={8192} onInput={set('secret')} aria-describedby="mcp-secret-error" />
                <FieldError id="mcp-secret-error" message={refusal.at('secret')} />
              </label>
            ) : null}
          </div>
          <label>
            Roles that may use it, one a line: <code>member</code> for every tool, <code>member=search,get_issue</code> for those tools
            <textarea name="access" rows={4} value={form.access} onInput={set('access')} placeholder={'member=search\nadmin'} aria-describedby="mcp-access-error" />
            <FieldError id="mcp-access-error" message={refusal.at('access')} />
          </label>
          <div class="row">
            <label class="grow">
              Resources they may read (none unless listed): <code>member</code> for all, <code>member=docs://handbook/*,tickets://T-1</code> for those (a prefix ends in *)
              <textarea name="resources" rows={2} value={form.resources} onInput={set('resources')} placeholder="member=docs://handbook/*" aria-describedby="mcp-resources-error" />
              <FieldError id="mcp-resources-error" message={refusal.at('resources')} />
            </label>
            <label class="grow">
              Prompts they may use (none unless listed): <code>member</code> for all, <code>member=triage</code> for those
              <textarea name="prompts" rows={2} value={form.prompts} onInput={set('prompts')} placeholder="member=triage" aria-describedby="mcp-prompts-error" />
              <FieldError id="mcp-prompts-error" message={refusal.at('prompts')} />
            </label>
          </div>
          <ErrorNote error={refusal.general} onClose={refusal.clear} />
          <div class="row">
            <button type="submit" class="primary">
              {editing ? 'Save changes' : 'Add MCP server'}
            </button>
            <button type="button" onClick={() => (setForm(null), setEditing(null))}>
              Cancel
            </button>
          </div>
        </form>
      )}
    </section>
  );
}
