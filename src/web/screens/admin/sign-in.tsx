import { useState } from 'preact/hooks';
import { api } from '../../api';
import { useLoad } from '../../use-load';
import { ErrorNote } from '../../components';
import { FieldError, useRefusal } from './fields';

interface SignInSettings {
  groupRoleMapping?: Record<string, string>;
  groupTeamMapping?: Record<string, string>;
  signIn?: { applyGroupMapping?: boolean };
}

type Mapping = 'groupRoleMapping' | 'groupTeamMapping';

// Sorted by group: the stored settings (jsonb) keep no order of their own.
const text = (mapping: Record<string, string> | undefined) =>
  Object.entries(mapping ?? {})
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([group, value]) => `${group} = ${value}`)
    .join('\n');

/** `group = value` lines as a mapping, split at the first `=` (as the CLI's GROUP=NAME); a line that is not one is its refusal. */
function parse(lines: string, value: string): Record<string, string> | string {
  const mapping: Record<string, string> = {};
  for (const [i, line] of lines.split('\n').entries()) {
    if (!line.trim()) continue;
    const at = line.indexOf('=');
    const group = line.slice(0, at).trim();
    const name = line.slice(at + 1).trim();
    if (at < 0 || !group || !name) return `line ${i + 1}: "${line.trim()}" is not "group = ${value}"`;
    mapping[group] = name;
  }
  return mapping;
}

/**
 * Group mapping at sign-in (admin.manage_tenant): tenant settings `signIn.applyGroupMapping`,
 * `groupRoleMapping` and `groupTeamMapping`, read at each browser sign-in. The API checks that every
 * role and team exists, so a typo never takes effect; a refusal naming a mapping is shown under it.
 */
export function SignInTab() {
  const [form, setForm] = useState<{ apply: boolean; groupRoleMapping: string; groupTeamMapping: string } | null>(null);
  // The form's own refusal of a line, before any request.
  const [lineErrors, setLineErrors] = useState<Partial<Record<Mapping, string>>>({});
  const [saved, setSaved] = useState(false);
  const refusal = useRefusal(['settings.groupRoleMapping', 'settings.groupTeamMapping']);
  const show = (s: SignInSettings) =>
    setForm({ apply: s.signIn?.applyGroupMapping === true, groupRoleMapping: text(s.groupRoleMapping), groupTeamMapping: text(s.groupTeamMapping) });
  const { error, setError } = useLoad(() => api<{ tenant: { settings: SignInSettings } }>('GET', '/admin/tenant').then((r) => show(r.tenant.settings)));
  if (!form) return <ErrorNote error={error} />;
  const save = async (e: Event) => {
    e.preventDefault();
    setSaved(false);
    const groupRoleMapping = parse(form.groupRoleMapping, 'role');
    const groupTeamMapping = parse(form.groupTeamMapping, 'team');
    const refused = (m: Record<string, string> | string) => (typeof m === 'string' ? m : undefined);
    setLineErrors({ groupRoleMapping: refused(groupRoleMapping), groupTeamMapping: refused(groupTeamMapping) });
    if (typeof groupRoleMapping === 'string' || typeof groupTeamMapping === 'string') return refusal.clear();
    await refusal.run(async () => {
      const r = await api<{ tenant: { settings: SignInSettings } }>('PATCH', '/admin/tenant', {
        settings: { groupRoleMapping, groupTeamMapping, signIn: { applyGroupMapping: form.apply } },
      });
      show(r.tenant.settings);
      setSaved(true);
    });
  };
  const set = (name: Mapping) => (e: { currentTarget: HTMLTextAreaElement }) => setForm({ ...form, [name]: e.currentTarget.value });
  return (
    <form class="setup-form" aria-label="Sign-in group mapping" onSubmit={save}>
      <ErrorNote error={error} onClose={() => setError(null)} />
      <p class="hint">
        Off (the default), sign-in leaves roles and teams as they are (SCIM, when set up, still provisions its groups as teams). On, each sign-in adds and removes the roles and teams mapped from the ID token's <code>groups</code> claim;
        roles and teams given by hand are never removed. When the identity provider sends too many groups (Entra's overage) or no groups claim, nothing changes and the sign-in is audited.
      </p>
      <p>
        <label>
          <input name="applyGroupMapping" type="checkbox" checked={form.apply} onChange={(e) => setForm({ ...form, apply: e.currentTarget.checked })} /> Apply the group mapping at each sign-in
        </label>
      </p>
      <p class="hint">
        One mapping a line, <code>group = role</code> or <code>group = team</code>: the group as the identity provider names it in that claim (Entra: the group's object id). Roles and teams must
        exist.
      </p>
      <div class="row">
        <label class="grow">
          Group → role
          <textarea name="groupRoleMapping" rows={6} value={form.groupRoleMapping} onInput={set('groupRoleMapping')} placeholder="engineering = member" aria-describedby="sign-in-roles-error" />
          <FieldError id="sign-in-roles-error" message={lineErrors.groupRoleMapping ?? refusal.at('settings.groupRoleMapping')} />
        </label>
        <label class="grow">
          Group → team
          <textarea name="groupTeamMapping" rows={6} value={form.groupTeamMapping} onInput={set('groupTeamMapping')} placeholder="engineering = Platform" aria-describedby="sign-in-teams-error" />
          <FieldError id="sign-in-teams-error" message={lineErrors.groupTeamMapping ?? refusal.at('settings.groupTeamMapping')} />
        </label>
      </div>
      <ErrorNote error={refusal.general} onClose={refusal.clear} />
      <div class="row">
        <button type="submit" class="primary">
          Save sign-in settings
        </button>
        {saved ? <small class="hint">Saved: the next sign-in follows it.</small> : null}
      </div>
    </form>
  );
}
