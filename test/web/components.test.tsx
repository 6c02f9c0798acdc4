import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { useState } from 'preact/hooks';
import { act } from 'preact/test-utils';
import { adminTabs } from '../../src/web/admin-tabs';
import { ErrorNote, Shell, Table } from '../../src/web/components';
import { matchRoute } from '../../src/web/route-match';
import { docsHref, navigation, ROUTES } from '../../src/web/routes';
import { TeamsTab } from '../../src/web/screens/admin/teams';
import { useLoad } from '../../src/web/use-load';
import type { Me } from '../../src/web/types';
import { installDom } from './dom';
import { mount, settle, stubApi } from './render';

const ROOT = join(import.meta.dirname, '..', '..');

const ALL = { manage_users: true, manage_roles: true, manage_templates: true, manage_providers: true, view_audit_log: true, manage_tenant: true };
const me = (admin: Partial<typeof ALL> = {}): Me => ({
  user: { id: 'u1', handle: 'olive', email: 'olive@acme.example', displayName: 'Olive', tenantId: 't1' },
  roles: ['member'],
  permissions: {
    agents: { create: true, delete: true, configure: true, terminal: true, code_host: true, use_templates: '*' },
    memory: { read_own: true, read_team: true, read_org: true, write: true, delete: true, share: true },
    tools: { allowed: '*', denied: [] },
    models: { allowed: '*' },
    admin: { manage_users: false, manage_roles: false, manage_templates: false, manage_providers: false, view_audit_log: false, manage_tenant: false, ...admin },
    cost: {},
  },
});

let dom: { remove: () => void };
beforeAll(() => {
  dom = installDom();
});
afterAll(() => dom.remove());
afterEach(() => {
  vi.unstubAllGlobals();
  document.body.replaceChildren();
});

describe('the dashboard\'s components, rendered in-process', () => {
  it('a message naming a setting links it to its entry in the configuration reference', async () => {
    const root = await mount(<ErrorNote error="memory quota reached — Delete memories, or ask the operator to raise AGENTWS_MEMORY_QUOTA." />);
    const link = root.querySelector('a.setting')!;
    expect(link.textContent).toBe('AGENTWS_MEMORY_QUOTA');
    expect(link.getAttribute('href')).toBe('/docs/reference/configuration#agentws_memory_quota');
    expect(root.querySelector('[role=alert]')!.textContent).toBe('memory quota reached — Delete memories, or ask the operator to raise AGENTWS_MEMORY_QUOTA.');
  });

  it('the header: the navigation the route table gives, and the screen\'s docs link', async () => {
    const who = me({ view_audit_log: true });
    const at = matchRoute(['admin', 'usage'], ROUTES)!;
    const root = await mount(
      <Shell me={who} demo={false} route="admin/usage" nav={navigation(who, at.route)} docs={{ href: docsHref(at.route, at.params, who), title: at.route.title }}>
        <p>screen</p>
      </Shell>,
    );
    expect([...root.querySelectorAll('nav[aria-label=Main] a')].map((a) => a.textContent)).toEqual(['Sessions', 'Plans', 'Memories', 'Skills', 'Connections', 'API tokens', 'Admin']);
    expect(root.querySelector('nav a[aria-current=page]')!.textContent).toBe('Admin');
    // The admin screen's docs are its open tab's.
    expect(root.querySelector('[data-testid=docs-link]')!.getAttribute('href')).toBe('/docs/admin/audit-and-data');
  });

  it('every screen and admin tab names a page of the docs', () => {
    const who = me(ALL);
    const pages = [...ROUTES.map((r) => docsHref(r, {}, who)), ...adminTabs(who.permissions).map((t) => `/docs/${t.docs}`)];
    // Each is a page of docs/ (docs/<page>.md, or docs/<page>/README.md for a section's first page).
    const missing = pages.map((p) => p.replace(/^\/docs\//, '')).filter((p) => !existsSync(join(ROOT, 'docs', `${p}.md`)) && !existsSync(join(ROOT, 'docs', p, 'README.md')));
    expect(missing).toEqual([]);
    // Without admin permissions there is no Admin link.
    expect(ROUTES.filter((r) => r.nav?.(me())).map((r) => r.title)).not.toContain('Admin');
  });

  it('a table: a heading a column, a row an item, each cell from its column', async () => {
    const root = await mount(
      <Table
        label="People"
        items={[{ id: 'a', name: 'Ann' }, { id: 'b', name: 'Bo' }]}
        id={(p) => p.id}
        testId={(p) => `person-${p.id}`}
        columns={[{ title: 'Name', cell: (p) => p.name, hint: (p) => p.id }, { title: '' }]}
      />,
    );
    expect([...root.querySelectorAll('th')].map((th) => th.textContent)).toEqual(['Name', '']);
    expect([...root.querySelectorAll('tbody tr')].map((tr) => tr.getAttribute('data-testid'))).toEqual(['person-a', 'person-b']);
    expect(root.querySelector('[data-testid=person-b] td')!.getAttribute('title')).toBe('b');
    expect(root.querySelector('table')!.getAttribute('aria-label')).toBe('People');
  });

  it('a screen loads its data through the API (teams and the people to add), and shows a failure in plain words', async () => {
    const calls = stubApi({
      '/admin/teams': { teams: [{ id: 't1', name: 'Platform', createdAt: '2026-01-01T00:00:00Z', members: [{ userId: 'u2', handle: 'mia', email: 'mia@acme.example', displayName: 'Mia', addedAt: '2026-01-01T00:00:00Z' }] }] },
      '/admin/users': { users: [{ id: 'u2', handle: 'mia', email: 'mia@acme.example', displayName: 'Mia', roles: [], createdAt: '2026-01-01T00:00:00Z' }, { id: 'u3', handle: 'noor', email: 'noor@acme.example', displayName: 'Noor', roles: [], createdAt: '2026-01-01T00:00:00Z' }] },
    });
    const root = await mount(<TeamsTab />);
    expect(calls.sort()).toEqual(['GET /admin/teams', 'GET /admin/users']);
    expect(root.querySelector('h2')!.textContent).toContain('Platform');
    expect(root.querySelector('.chip')!.textContent).toContain('Mia');
    // Only those not in the team yet are offered.
    expect([...root.querySelectorAll('select[aria-label="Add a member to Platform"] option')].map((o) => o.textContent)).toEqual(['Add member…', 'Noor']);

    stubApi({ '/admin/teams': { status: 503, body: { error: 'unavailable', message: 'the database is not reachable', hint: 'check AGENTWS_DATABASE_POOL_MAX' } } });
    const failed = await mount(<TeamsTab />);
    expect(failed.querySelector('[role=alert]')!.textContent).toContain('the database is not reachable — check AGENTWS_DATABASE_POOL_MAX');
    expect(failed.querySelector('[role=alert] a')!.getAttribute('href')).toBe('/docs/reference/configuration#agentws_database_pool_max');
  });

  it('useLoad: an answer to an older question never replaces a newer one', async () => {
    const pending = new Map<string, (v: string) => void>();
    let setQ: (q: string) => void = () => {};
    function Probe() {
      const [q, set] = useState('a');
      setQ = set;
      const { data, loading } = useLoad(() => new Promise<string>((resolve) => pending.set(q, resolve)), [q]);
      return <p>{loading ? 'loading' : data}</p>;
    }
    const root = await mount(<Probe />);
    await act(() => setQ('b'));
    await settle();
    // b answers first, then the slow a: b stays.
    await act(() => pending.get('b')!('answer b'));
    await settle();
    await act(() => pending.get('a')!('answer a'));
    await settle();
    expect(root.textContent).toBe('answer b');
  });
});
