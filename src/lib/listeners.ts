/**
 * Listeners told of something in turn, in the order they were added. One that throws is reported to
 * `failed` and stops neither the others nor whoever is telling them.
 */
export function createListeners<A extends unknown[]>(failed: (err: Error) => void) {
  const listeners = new Set<(...args: A) => void>();
  return {
    /** Adds a listener; the function returned removes it. */
    add(listener: (...args: A) => void): () => void {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
    notify(...args: A): void {
      for (const l of listeners) {
        try {
          l(...args);
        } catch (err) {
          failed(err instanceof Error ? err : new Error(String(err)));
        }
      }
    },
  };
}
