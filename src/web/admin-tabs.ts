import type { Permissions } from './types';

/** An admin tab: its address (#/admin/<id>), its label, and its page of the docs (under /docs). */
export interface AdminTab {
  id: string;
  label: string;
  docs: string;
}

/**
 * The admin screens a user's permissions open, in order: the one place that decides the Admin link in
 * the navigation (shown when there is any), the tabs of the admin screen and each tab's docs link.
 */
export function adminTabs(p: Permissions): AdminTab[] {
  const a = p.admin;
  const all: Array<[string, string, string, boolean]> = [
    ['users', 'Users and roles', 'admin/roles', a.manage_users],
    ['teams', 'Teams', 'admin/memories-and-skills', a.manage_users],
    ['audit', 'Audit log', 'admin/audit-and-data', a.view_audit_log],
    ['usage', 'Usage', 'admin/audit-and-data', a.view_audit_log],
    ['providers', 'Models and runtime', 'admin/providers', a.manage_providers],
    ['embedder', 'Embedder', 'operating/embedders-and-jobs', a.manage_providers],
    ['gateways', 'Gateways', 'admin/gateways', a.manage_providers],
    ['git', 'Git hosts', 'admin/connectors', a.manage_providers],
    ['mcp', 'MCP servers', 'admin/connectors', a.manage_providers],
    ['templates', 'Templates', 'using/sessions', a.manage_templates],
    ['roles', 'Custom roles', 'admin/roles', a.manage_roles],
    ['limits', 'Cost limits', 'admin/limits', a.manage_roles],
    ['sign-in', 'Sign-in', 'admin/identity', a.manage_tenant],
    ['egress', 'Egress', 'security', a.manage_tenant],
  ];
  return all.filter(([, , , allowed]) => allowed).map(([id, label, docs]) => ({ id, label, docs }));
}

/** The tab an address asks for, among those open to the user: the first when it names none of them. */
export function adminTab(tabs: AdminTab[], asked: string | undefined): AdminTab | undefined {
  const id = asked === 'runtime' ? 'providers' : asked; // the tab's earlier address
  return tabs.find((t) => t.id === id) ?? tabs[0];
}
