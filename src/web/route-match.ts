/** The parts of an address a route's `:name` segments take (`#/sessions/abc` on `sessions/:id` → { id: 'abc' }). */
export type Params = Record<string, string | undefined>;

/** The route an address (its segments, `#/sessions/abc` → ['sessions', 'abc']) asks for, and its parts; null: none. */
export function matchRoute<R extends { path: string }>(segments: string[], routes: R[]): { route: R; params: Params } | null {
  const parts = segments.filter((s, i) => s !== '' || i < segments.length - 1); // `#/sessions/` is `#/sessions`
  for (const route of routes) {
    const pattern = route.path.split('/');
    if (parts.length > pattern.length) continue;
    const params: Params = {};
    const fits = pattern.every((p, i) => {
      if (!p.startsWith(':')) return parts[i] === p;
      const optional = p.endsWith('?');
      if (parts[i] === undefined || parts[i] === '') return optional;
      params[p.slice(1, optional ? -1 : undefined)] = parts[i];
      return true;
    });
    if (fits) return { route, params };
  }
  return null;
}
