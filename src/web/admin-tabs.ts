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
    ['providers', 'Models and runtime', a.manage_providers],
    ['embedder', 'Embedder', a.manage_providers],
    ['gateways', 'Gateways', a.manage_providers],
    ['git', 'Git hosts', a.manage_providers],
    ['mcp', 'MCP servers', a.manage_providers],
    ['templates', 'Templates', a.manage_templates],
    ['roles', 'Custom roles', a.manage_roles],
    ['limits', 'Cost limits', a.manage_roles],
    ['sign-in', 'Sign-in', a.manage_tenant],
    ['egress', 'Egress', a.manage_tenant],
  ];
  return all.filter(([, , allowed]) => allowed).map(([id, label]) => [id, label]);
}
