/**
 * A small cache of promises by key, each kept for `ttlMs`: callers within that time share one load
 * (and its pending promise, so a burst of requests makes one query). A load that rejects is forgotten at
 * once (the next caller tries again) unless `keepRejected`. Bounded: past `max` keys it starts afresh
 * (a burst of distinct keys costs reloads, never memory).
 */
export function createPromiseCache<T>(o: { ttlMs: number; max?: number; now?: () => number }) {
  const max = o.max ?? 10_000;
  const now = o.now ?? Date.now;
  const entries = new Map<string, { at: number; value: Promise<T> }>();
  return {
    get(key: string, load: () => Promise<T>): Promise<T> {
      const hit = entries.get(key);
      if (hit && now() - hit.at < o.ttlMs) return hit.value;
      if (entries.size >= max) entries.clear();
      const value = load();
      const entry = { at: now(), value };
      entries.set(key, entry);
      // Only this load's entry: a newer one set meanwhile stays.
      value.catch(() => entries.get(key) === entry && entries.delete(key));
      return value;
    },
    /** The promise cached for a key, however old; undefined when there is none. */
    peek: (key: string): Promise<T> | undefined => entries.get(key)?.value,
    delete: (key: string) => void entries.delete(key),
    clear: () => entries.clear(),
  };
}
