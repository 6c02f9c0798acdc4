import { describe, expect, it } from 'vitest';
import { matchRoute } from '../../src/web/route-match.js';

const routes = [{ path: 'sign-in-link/:token?' }, { path: 'sessions/:id' }, { path: 'sessions' }, { path: 'plans/:id?' }, { path: 'admin/:tab?' }];
const at = (hash: string) => {
  const m = matchRoute(hash.split('/'), routes);
  return m ? [m.route.path, m.params] : null;
};

describe('the dashboard\'s route table', () => {
  it('the first route whose path fits the address, with its parts', () => {
    expect(at('sessions')).toEqual(['sessions', {}]);
    expect(at('sessions/abc')).toEqual(['sessions/:id', { id: 'abc' }]);
    expect(at('sessions/')).toEqual(['sessions', {}]); // a trailing slash is the same address
    expect(at('plans')).toEqual(['plans/:id?', {}]);
    expect(at('plans/p1')).toEqual(['plans/:id?', { id: 'p1' }]);
    expect(at('admin/usage')).toEqual(['admin/:tab?', { tab: 'usage' }]);
    expect(at('sign-in-link/t0k3n')).toEqual(['sign-in-link/:token?', { token: 't0k3n' }]);
  });

  it('nothing for an address no route has, or with more parts than its path', () => {
    expect(at('nowhere')).toBeNull();
    expect(at('sessions/abc/more')).toBeNull();
    expect(at('admin/usage/x')).toBeNull();
  });
});
