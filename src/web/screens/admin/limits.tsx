import { useState } from 'preact/hooks';
import { api } from '../../api';
import { useLoad } from '../../use-load';
import { ErrorNote, Table, usd } from '../../components';
import { FieldError, useRefusal } from './fields';
import type { RoleDoc } from './roles';

/**
 * Cost limits per role (admin.manage_roles): each role's `cost.monthly_limit_usd` and
 * `cost.per_request_limit_usd`, changed through PATCH /v1/admin/roles/:id with only the `cost` group.
 */
export function LimitsTab() {
  const { data: roles, error, setError, reload: load } = useLoad(() => api<{ roles: RoleDoc[] }>('GET', '/admin/roles').then((r) => r.roles));
  return (
    <div>
      <p class="hint">
        Empty means no limit. A person with several roles gets the most generous of their limits (no limit is the most generous); the monthly limit counts the calendar month (UTC), the
        per-request limit one turn or plan.
      </p>
      <ErrorNote error={error} onClose={() => setError(null)} />
      {roles ? (
        <Table
          items={roles}
          id={(r) => r.id}
          columns={[{ title: 'Role' }, { title: 'Members' }, { title: 'Monthly limit (USD)' }, { title: 'Per-request limit (USD)' }, { title: '' }]}
          row={(r) => <LimitRow role={r} onSaved={load} />}
        />
      ) : null}
    </div>
  );
}

const text = (n: number | undefined) => (n === undefined ? '' : String(n));

function LimitRow(props: { role: RoleDoc; onSaved: () => Promise<unknown> }) {
  const { role } = props;
  const [monthly, setMonthly] = useState(text(role.permissions.cost.monthly_limit_usd));
  const [perRequest, setPerRequest] = useState(text(role.permissions.cost.per_request_limit_usd));
  const [saved, setSaved] = useState(false);
  const refusal = useRefusal(['permissions.cost.monthly_limit_usd', 'permissions.cost.per_request_limit_usd']);
  const form = `limits-${role.id}`;
  const save = async (e: Event) => {
    e.preventDefault();
    setSaved(false);
    const cost: Record<string, number> = {};
    if (monthly.trim()) cost.monthly_limit_usd = Number(monthly);
    if (perRequest.trim()) cost.per_request_limit_usd = Number(perRequest);
    if (await refusal.run(() => api('PATCH', `/admin/roles/${role.id}`, { permissions: { cost } }))) {
      setSaved(true);
      await props.onSaved();
    }
  };
  const c = role.permissions.cost;
  return (
    <tr data-testid={`limits-${role.name}`}>
      <td>
        {role.name} {role.isSystem ? <span class="tag">system</span> : null}
        <br />
        <small class="hint">{c.monthly_limit_usd === undefined && c.per_request_limit_usd === undefined ? 'no limits' : [c.monthly_limit_usd !== undefined ? `${usd(c.monthly_limit_usd)} a month` : '', c.per_request_limit_usd !== undefined ? `${usd(c.per_request_limit_usd)} a request` : ''].filter(Boolean).join(', ')}</small>
      </td>
      <td>{role.members ?? ''}</td>
      <td>
        <input form={form} type="number" min="0" step="0.01" name="monthly_limit_usd" aria-label={`Monthly limit of ${role.name}`} value={monthly} onInput={(e) => setMonthly(e.currentTarget.value)} />
        <FieldError message={refusal.at('permissions.cost.monthly_limit_usd')} />
      </td>
      <td>
        <input form={form} type="number" min="0" step="0.01" name="per_request_limit_usd" aria-label={`Per-request limit of ${role.name}`} value={perRequest} onInput={(e) => setPerRequest(e.currentTarget.value)} />
        <FieldError message={refusal.at('permissions.cost.per_request_limit_usd')} />
      </td>
      <td>
        <form id={form} onSubmit={save} aria-label={`Cost limits of ${role.name}`}>
          <button type="submit">Save</button> {saved ? <small class="hint">saved</small> : null}
        </form>
        <ErrorNote error={refusal.general} onClose={refusal.clear} />
      </td>
    </tr>
  );
}
