import { useState } from 'preact/hooks';
import { api, explain } from '../../api';
import { useLoad } from '../../use-load';
import { ErrorNote, Table } from '../../components';
import type { Permissions } from '../../types';
import { FieldError, useRefusal } from './fields';
import { modelsSummary, RoleModels } from './role-models';
import type { Role as RoleDoc } from '../../wire';
export type { RoleDoc };

/** The yes/no permissions of a role document, by group, as the API names them. */
const FLAGS = {
  agents: ['create', 'delete', 'configure', 'terminal', 'code_host'],
  memory: ['read_own', 'read_team', 'read_org', 'write', 'delete', 'share'],
  admin: ['manage_users', 'manage_roles', 'manage_templates', 'manage_providers', 'view_audit_log', 'manage_tenant'],
} as const;
type Group = keyof typeof FLAGS;

type Lists = { use_templates: string; allowed: string; denied: string };
interface Draft {
  name: string;
  description: string;
  flags: Record<string, boolean>;
  lists: Lists;
}

const listText = (v: string[] | '*') => (v === '*' ? '*' : v.join(', '));
const parseList = (s: string) => s.split(/[\s,]+/).filter(Boolean);
const orAll = (l: string[]): string[] | '*' => (l.includes('*') ? '*' : l);

function draftOf(r?: RoleDoc): Draft {
  const flags: Record<string, boolean> = {};
  for (const g of Object.keys(FLAGS) as Group[]) for (const m of FLAGS[g]) flags[`${g}.${m}`] = Boolean(r && (r.permissions[g] as Record<string, unknown>)[m]);
  return {
    name: r?.name ?? '',
    description: r?.description ?? '',
    flags,
    lists: r
      ? { use_templates: listText(r.permissions.agents.use_templates), allowed: listText(r.permissions.tools.allowed), denied: r.permissions.tools.denied.join(', ') }
      : { use_templates: '', allowed: '', denied: '' },
  };
}

/** The groups the form edits; `cost` is left out, so a role keeps its limits (the Cost limits tab sets them). */
function documentOf(d: Draft) {
  const group = (g: Group) => Object.fromEntries(FLAGS[g].map((m) => [m, d.flags[`${g}.${m}`]]));
  return {
    agents: { ...group('agents'), use_templates: orAll(parseList(d.lists.use_templates)) },
    memory: group('memory'),
    admin: group('admin'),
    tools: { allowed: orAll(parseList(d.lists.allowed)), denied: parseList(d.lists.denied) },
  };
}

/**
 * Custom roles (admin.manage_roles): create one, or edit its permission document. Only what the editor
 * holds can be granted (the API refuses the rest, and its refusal is shown): the permissions they do not
 * hold are disabled. System roles are listed for reference; their cost limits are on the Cost limits tab,
 * and the terminal (agents.terminal) and issues handed over from a git host (agents.code_host) are taken
 * from or given back to them here.
 */
export function RolesTab(props: { held: Permissions }) {
  const [editing, setEditing] = useState<RoleDoc | 'new' | null>(null);
  const [models, setModels] = useState<RoleDoc | null>(null);
  const [draft, setDraft] = useState<Draft>(draftOf());
  const refusal = useRefusal(['name', 'permissions.tools'], { conflictAt: 'name' });
  const { data: roles, error, setError, reload: load } = useLoad(() => api<{ roles: RoleDoc[] }>('GET', '/admin/roles').then((r) => r.roles));

  const open = (r: RoleDoc | 'new') => {
    refusal.clear();
    setEditing(r);
    setDraft(draftOf(r === 'new' ? undefined : r));
  };
  const save = async (e: Event) => {
    e.preventDefault();
    const permissions = documentOf(draft);
    const ok = await refusal.run(() =>
      editing === 'new'
        ? api('POST', '/admin/roles', { name: draft.name.trim(), description: draft.description.trim(), permissions })
        : api('PATCH', `/admin/roles/${(editing as RoleDoc).id}`, { description: draft.description.trim(), permissions }),
    );
    if (ok) {
      setEditing(null);
      await load();
    }
  };
  const toggleAgents = async (r: RoleDoc, flag: 'terminal' | 'code_host') => {
    try {
      await api('PATCH', `/admin/roles/${r.id}`, { permissions: { agents: { ...r.permissions.agents, [flag]: !r.permissions.agents[flag] } } });
      await load();
    } catch (err) {
      setError(explain(err));
    }
  };
  const held = (g: Group, m: string) => (props.held[g] as Record<string, unknown>)[m] === true;
  const setList = (k: keyof Lists) => (e: { currentTarget: HTMLInputElement }) => setDraft({ ...draft, lists: { ...draft.lists, [k]: e.currentTarget.value } });

  return (
    <div>
      <ErrorNote error={error} onClose={() => setError(null)} />
      {editing === null ? (
        <button type="button" class="primary" onClick={() => open('new')}>
          New role
        </button>
      ) : (
        <form class="setup-form" aria-label={editing === 'new' ? 'New role' : `Edit role ${editing.name}`} onSubmit={save}>
          <div class="row">
            <label>
              Name
              <input name="name" value={draft.name} disabled={editing !== 'new'} required pattern="[a-z0-9][a-z0-9_\-]{0,62}" onInput={(e) => setDraft({ ...draft, name: e.currentTarget.value })} placeholder="e.g. reviewer" />
              <FieldError message={refusal.at('name')} />
            </label>
            <label class="grow">
              Description
              <input name="description" value={draft.description} maxLength={500} onInput={(e) => setDraft({ ...draft, description: e.currentTarget.value })} />
            </label>
          </div>
          {(Object.keys(FLAGS) as Group[]).map((g) => (
            <fieldset class="perms" key={g}>
              <legend>{g}</legend>
              {FLAGS[g].map((m) => {
                const key = `${g}.${m}`;
                const grantable = held(g, m);
                return (
                  <label key={key} title={grantable ? key : `${key}: you do not hold it, so you cannot grant it`} class={grantable ? undefined : 'not-held'}>
                    <input
                      type="checkbox"
                      name={key}
                      checked={draft.flags[key]}
                      // Taking a permission away is always possible; granting one needs holding it.
                      disabled={!grantable && !draft.flags[key]}
                      onChange={(e) => setDraft({ ...draft, flags: { ...draft.flags, [key]: e.currentTarget.checked } })}
                    />{' '}
                    {m.replaceAll('_', ' ')}
                  </label>
                );
              })}
            </fieldset>
          ))}
          <div class="row">
            <label>
              Templates it may use
              <input name="agents.use_templates" value={draft.lists.use_templates} onInput={setList('use_templates')} placeholder="slugs, or * for all" />
            </label>
            <label>
              Tools allowed
              <input name="tools.allowed" value={draft.lists.allowed} onInput={setList('allowed')} placeholder="e.g. read, edit, or * for all" />
              <FieldError message={refusal.at('permissions.tools')} />
            </label>
            <label>
              Tools denied
              <input name="tools.denied" value={draft.lists.denied} onInput={setList('denied')} placeholder="e.g. bash" />
            </label>
          </div>
          <p class="hint">Greyed-out permissions are ones you do not hold: nobody grants what they do not hold.</p>
          <ErrorNote error={refusal.general} onClose={refusal.clear} />
          <div class="row">
            <button type="submit" class="primary">
              {editing === 'new' ? 'Create role' : 'Save role'}
            </button>
            <button type="button" onClick={() => setEditing(null)}>
              Cancel
            </button>
          </div>
        </form>
      )}
      {models ? (
        <RoleModels
          key={models.id}
          role={models}
          onDone={(saved) => {
            setModels(null);
            if (saved) void load();
          }}
        />
      ) : null}
      {roles ? (
        <Table
          items={roles}
          id={(r) => r.id}
          testId={(r) => `role-${r.name}`}
          columns={[
            {
              title: 'Role',
              cell: (r) => (
                <>
                  {r.name} {r.isSystem ? <span class="tag">system</span> : null}
                  <br />
                  <small class="hint">{r.description}</small>
                </>
              ),
            },
            { title: 'Members', cell: (r) => r.members ?? '' },
            { title: 'Grants', cell: (r) => <small>{summary(r.permissions)}</small> },
            {
              title: '',
              cell: (r) => (
                <>
                  {/* Every role's model allow-list can change, the system roles' too. */}
                  {r.name === 'viewer' && r.isSystem ? null : (
                    <button type="button" class="link" onClick={() => setModels(r)}>
                      Models
                    </button>
                  )}{' '}
                  {r.isSystem ? (
                    // A system role keeps its document, but the terminal and issue hand-over can be taken from it (or given back).
                    r.name === 'viewer' && !r.permissions.agents.terminal && !r.permissions.agents.code_host ? null : (
                      <>
                        {r.name === 'viewer' && !r.permissions.agents.terminal ? null : (
                          <button type="button" class="link" onClick={() => void toggleAgents(r, 'terminal')}>
                            {r.permissions.agents.terminal ? 'Take the terminal away' : 'Give the terminal back'}
                          </button>
                        )}{' '}
                        {r.name === 'viewer' && !r.permissions.agents.code_host ? null : (
                          <button type="button" class="link" onClick={() => void toggleAgents(r, 'code_host')}>
                            {r.permissions.agents.code_host ? 'Take issue hand-over away' : 'Give issue hand-over back'}
                          </button>
                        )}
                      </>
                    )
                  ) : (
                    <button type="button" class="link" onClick={() => open(r)}>
                      Edit
                    </button>
                  )}
                </>
              ),
            },
          ]}
        />
      ) : null}
    </div>
  );
}

/** What a document grants, in one line. */
function summary(p: Permissions): string {
  const on = (Object.keys(FLAGS) as Group[]).flatMap((g) => FLAGS[g].filter((m) => (p[g] as Record<string, unknown>)[m] === true).map((m) => `${g}.${m}`));
  const tools = p.tools.allowed === '*' ? 'all tools' : p.tools.allowed.length ? `tools: ${p.tools.allowed.join(', ')}` : 'no tools';
  return [...on, tools + (p.tools.denied.length ? ` except ${p.tools.denied.join(', ')}` : ''), modelsSummary(p.models?.allowed)].join(' · ');
}
