
import { api, explain } from '../../api';
import { useLoad } from '../../use-load';
import { ErrorNote, Table } from '../../components';
import type { User, Role } from '../../wire';
export type { User };

/** People of the tenant and their roles; those who may manage roles assign and take them here. */
export function UsersTab(props: { canRoles: boolean }) {
  const { data: users, error, setError, reload: load } = useLoad(() => api<{ users: User[] }>('GET', '/admin/users').then((r) => r.users));
  // Only where the viewer may assign roles: a refusal would be a console error.
  const roleList = useLoad(() => (props.canRoles ? api<{ roles: Role[] }>('GET', '/admin/roles').then((r) => r.roles) : Promise.resolve([])));
  const roles = roleList.data ?? [];
  const assign = async (u: User, roleId: string) => {
    try {
      await api('POST', `/admin/users/${u.id}/roles`, { roleId });
      await load();
    } catch (err) {
      setError(explain(err));
    }
  };
  const revoke = async (u: User, name: string) => {
    const role = roles.find((r) => r.name === name);
    if (!role || !confirm(`Take the role ${name} from ${u.displayName || u.handle}?`)) return;
    try {
      await api('DELETE', `/admin/users/${u.id}/roles/${role.id}`);
      await load();
    } catch (err) {
      setError(explain(err));
    }
  };
  return (
    <div>
      <ErrorNote error={error ?? roleList.error} onClose={() => {
          setError(null);
          roleList.setError(null);
        }} />
      {users === null ? <p class="boot">Loading…</p> : null}
      <Table
        items={users ?? []}
        id={(u) => u.id}
        testId={(u) => `user-${u.handle}`}
        columns={[
          { title: 'User', cell: (u) => u.displayName || u.handle },
          { title: 'Email', cell: (u) => u.email },
          {
            title: 'Roles',
            cell: (u) =>
              u.roles.map((r) => (
                <span class="chip">
                  {r}
                  {roles.length ? (
                    <button type="button" class="link" aria-label={`Revoke ${r}`} onClick={() => revoke(u, r)}>
                      ×
                    </button>
                  ) : null}
                </span>
              )),
          },
          // Only for those who may assign roles.
          ...(roles.length
            ? [
                {
                  title: 'Assign',
                  cell: (u: User) => (
                    <select
                      aria-label={`Assign a role to ${u.handle}`}
                      onChange={(e) => {
                        const v = e.currentTarget.value;
                        e.currentTarget.value = '';
                        if (v) void assign(u, v);
                      }}
                    >
                      <option value="">Add role…</option>
                      {roles
                        .filter((r) => !u.roles.includes(r.name))
                        .map((r) => (
                          <option value={r.id}>{r.name}</option>
                        ))}
                    </select>
                  ),
                },
              ]
            : []),
        ]}
      />
    </div>
  );
}
