import type { Permissions } from './types';

/**
 * The admin screens a user's permissions open, in order, as [id, label]: the one place that decides
 * both the Admin link in the navigation (shown when there is any) and the tabs of the admin screen.
 */
export function adminTabs(p: Permissions): Array<[string, string]> {
  const a = p.admin;
  const all: Array<[string, string, boolean]> = [
    ['users', 'Users and roles', a.manage_users],
    ['teams', 'Teams', a.manage_users],
    ['audit', 'Audit log', a.view_audit_log],
    ['usage', 'Usage', a.view_audit_log],
    ['runtime', 'Models and runtime', a.manage_providers],
    ['gateways', 'Gateways', a.manage_providers],
  ];
  return all.filter(([, , allowed]) => allowed).map(([id, label]) => [id, label]);
}
