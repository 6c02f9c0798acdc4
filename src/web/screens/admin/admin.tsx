import { adminTab, adminTabs } from '../../admin-tabs';
import type { Me } from '../../types';
import { AuditTab } from './audit';
import { EgressTab } from './egress';
import { GatewaysTab } from './gateways';
import { GitHostsTab } from './git-hosts';
import { McpServersTab } from './mcp-servers';
import { LimitsTab } from './limits';
import { RolesTab } from './roles';
import { ScimTokensPanel } from './scim';
import { SignInTab } from './sign-in';
import { TeamsTab } from './teams';
import { TemplatesTab } from './templates';
import { UsageTab } from './usage';
import { UsersTab } from './users';
import { EmbedderTab } from '../setup/embedder';
import { ProvidersTab } from '../setup/providers';

/** The admin screens a user's permissions open: users and roles, the audit log, usage, gateways. */
export function AdminScreen(props: { me: Me; tab: string | undefined }) {
  const a = props.me.permissions.admin;
  const tabs = adminTabs(props.me.permissions);
  const tab = adminTab(tabs, props.tab)?.id;
  return (
    <section class="admin">
      <h1>Admin</h1>
      <nav class="tabs" aria-label="Admin">
        {tabs.map(({ id, label }) => (
          <a href={`#/admin/${id}`} aria-current={id === tab ? 'page' : undefined}>
            {label}
          </a>
        ))}
      </nav>
      {!tab ? <p class="empty">Your roles open no admin screen.</p> : null}
      {tab === 'users' ? <UsersTab canRoles={a.manage_roles} /> : null}
      {tab === 'audit' ? <AuditTab /> : null}
      {tab === 'usage' ? <UsageTab canUsers={a.manage_users} /> : null}
      {tab === 'teams' ? <TeamsTab /> : null}
      {tab === 'providers' ? <ProvidersTab /> : null}
      {tab === 'embedder' ? <EmbedderTab canUsers={a.manage_users} /> : null}
      {tab === 'gateways' ? <GatewaysTab /> : null}
      {tab === 'git' ? <GitHostsTab /> : null}
      {tab === 'mcp' ? <McpServersTab /> : null}
      {tab === 'templates' ? <TemplatesTab /> : null}
      {tab === 'roles' ? <RolesTab held={props.me.permissions} /> : null}
      {tab === 'limits' ? <LimitsTab /> : null}
      {tab === 'sign-in' ? <SignInTab /> : null}
      {tab === 'sign-in' ? <ScimTokensPanel canUsers={a.manage_users} /> : null}
      {tab === 'egress' ? <EgressTab /> : null}
    </section>
  );
}
