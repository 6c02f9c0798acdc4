import { useEffect, useState } from 'preact/hooks';
import { api, explain } from '../api';
import { ErrorNote } from '../components';

export interface User {
  id: string;
  handle: string;
  email: string;
  displayName: string;
  roles: string[];
}
interface Role {
  id: string;
  name: string;
  description: string;
}

/** People of the tenant and their roles; those who may manage roles assign and take them here. */
export function UsersTab(props: { canRoles: boolean }) {
  const [users, setUsers] = useState<User[] | null>(null);
  const [roles, setRoles] = useState<Role[]>([]);
  const [error, setError] = useState<string | null>(null);
  const load = () =>
    api<{ users: User[] }>('GET', '/admin/users').then(
      (r) => setUsers(r.users),
      (err) => setError(explain(err)),
    );
  useEffect(() => {
    void load();
    if (props.canRoles) void api<{ roles: Role[] }>('GET', '/admin/roles').then((r) => setRoles(r.roles), (err) => setError(explain(err)));
  }, []);
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
      <ErrorNote error={error} onClose={() => setError(null)} />
      {users === null ? <p class="boot">Loading…</p> : null}
      <table>
        <thead>
          <tr>
            <th>User</th>
            <th>Email</th>
            <th>Roles</th>
            {roles.length ? <th>Assign</th> : null}
          </tr>
        </thead>
        <tbody>
          {users?.map((u) => (
            <tr key={u.id} data-testid={`user-${u.handle}`}>
              <td>{u.displayName || u.handle}</td>
              <td>{u.email}</td>
              <td>
                {u.roles.map((r) => (
                  <span class="chip">
                    {r}
                    {roles.length ? (
                      <button type="button" class="link" aria-label={`Revoke ${r}`} onClick={() => revoke(u, r)}>
                        ×
                      </button>
                    ) : null}
                  </span>
                ))}
              </td>
              {roles.length ? (
                <td>
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
                </td>
              ) : null}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
