import type { ComponentChildren } from 'preact';
import { adminTab, adminTabs } from './admin-tabs';
import { DemoSignedOut } from './components';
import { AdminScreen } from './screens/admin/admin';
import { ConnectionsScreen } from './screens/connections';
import { MemoriesScreen } from './screens/memories';
import { PlansScreen } from './screens/plans';
import { SessionScreen } from './screens/session/session-screen';
import { SessionsScreen } from './screens/sessions';
import { SignInLinkScreen } from './screens/sign-in/link';
import { SkillsScreen } from './screens/skills';
import { TokensScreen } from './screens/tokens';
import type { Params } from './route-match';
import type { Me } from './types';

/** What a screen open to anyone is given: the address's parts, and what to call once it has signed the browser in. */
interface OpenContext {
  params: Params;
  signedIn: () => void;
}

/** What a signed-in screen is given: who is signed in and the address's parts. */
interface Context {
  me: Me;
  params: Params;
}

export interface Route {
  /** The address after `#/`: literal segments, `:name` a segment given to the screen, `:name?` one that may be absent. */
  path: string;
  /** Its name in the navigation and its docs link. */
  title: string;
  /** Its page of the docs (under /docs, docs/<page>.md); by the address where the screen has parts with pages of their own. */
  docs: string | ((params: Params, me: Me) => string);
  /** In the main navigation, for those it returns true for; absent: not there. */
  nav?: (me: Me) => boolean;
  /** Only for those it returns true for; the others find nothing at its address. */
  when?: (me: Me) => boolean;
  /** The screen, in the frame of the signed-in screens (navigation, docs link, sign-out). */
  screen?: (c: Context) => ComponentChildren;
  /** Or a screen shown whoever is signed in, or nobody, without that frame. */
  open?: (c: OpenContext) => ComponentChildren;
}

const everyone = () => true;

/**
 * Every screen of the dashboard, in the navigation's order: the one list the routing, the navigation and
 * each screen's docs link are made from. The first route whose path fits the address is the screen.
 */
export const ROUTES: Route[] = [
  // A one-time sign-in link, whoever is signed in now: using it signs this browser in as its person.
  { path: 'sign-in-link/:token?', title: 'Sign in', docs: 'admin/identity', open: (c) => <SignInLinkScreen token={c.params.token} onSignedIn={c.signedIn} /> },
  { path: 'sessions/:id', title: 'Session', docs: 'using/sessions', screen: (c) => <SessionScreen me={c.me} sessionId={c.params.id!} key={c.params.id} /> },
  { path: 'sessions', title: 'Sessions', docs: 'using/sessions', nav: everyone, screen: (c) => <SessionsScreen me={c.me} /> },
  { path: 'plans/:id?', title: 'Plans', docs: 'using/orchestration', nav: everyone, screen: (c) => <PlansScreen planId={c.params.id} key={c.params.id ?? 'list'} /> },
  { path: 'memories', title: 'Memories', docs: 'admin/memories-and-skills', nav: everyone, screen: (c) => <MemoriesScreen me={c.me} /> },
  { path: 'skills/:id?', title: 'Skills', docs: 'admin/memories-and-skills', nav: everyone, screen: (c) => <SkillsScreen me={c.me} skillId={c.params.id} key={c.params.id ?? 'list'} /> },
  // Everyone's: a person's own accounts at the git hosts, which their agents then act as.
  { path: 'connections', title: 'Connections', docs: 'admin/connectors', nav: everyone, screen: () => <ConnectionsScreen /> },
  // Everyone's: tokens for the person's own scripts.
  { path: 'tokens', title: 'API tokens', docs: 'admin/tokens', nav: everyone, screen: () => <TokensScreen /> },
  // Only when the user's permissions open at least one admin tab; the docs are the open tab's.
  {
    path: 'admin/:tab?',
    title: 'Admin',
    docs: (p, me) => adminTab(adminTabs(me.permissions), p.tab)?.docs ?? 'admin/roles',
    nav: (me) => adminTabs(me.permissions).length > 0,
    screen: (c) => <AdminScreen me={c.me} tab={c.params.tab} />,
  },
  // In demo mode there is no sign-in to end: the page that says so, and how to turn sign-in on.
  { path: 'signed-out', title: 'Signed out', docs: 'getting-started', when: (me) => me.demo === true, screen: (c) => <DemoSignedOut me={c.me} /> },
];

/** The docs page of a route at an address, as a link's target. */
export const docsHref = (route: Route, params: Params, me: Me) => `/docs/${typeof route.docs === 'string' ? route.docs : route.docs(params, me)}`;

/** The first segment of a route's path: the navigation's link and what it marks as current. */
const routeRoot = (route: Route) => route.path.split('/')[0];

/** The main navigation for `me`, the screen shown (`at`, null: none) marked as current. */
export const navigation = (me: Me, at: Route | null) =>
  ROUTES.filter((r) => r.nav?.(me)).map((r) => ({ href: `#/${routeRoot(r)}`, title: r.title, current: at !== null && routeRoot(r) === routeRoot(at) }));
