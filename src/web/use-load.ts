import { useEffect, useRef, useState } from 'preact/hooks';
import { explain } from './api';

export interface Loaded<T> {
  /** The last answer; null until the first arrives (kept while a reload runs, and when one fails). */
  data: T | null;
  /** The last load's failure in plain words (until a load succeeds), or a change's the screen put here (`setError`, until dismissed); null: none. */
  error: string | null;
  /** Whether a load is under way. */
  loading: boolean;
  /** Loads again (after a change); resolves once shown, a failure becoming `error`. */
  reload: () => Promise<void>;
  setError: (message: string | null) => void;
  /** Replaces what is shown without asking (an answer a change returned). */
  setData: (data: T) => void;
}

/**
 * What a screen shows, loaded from the API: `load` runs at once and again whenever `deps` change; its
 * failure becomes the screen's error (`explain`, in plain words). An answer that arrives after a newer
 * load started (the deps changed meanwhile, a filter typed on) is dropped, so the screen never shows an
 * older question's answer. The screen's changes usually go through `changer(reload, setError)`.
 */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []): Loaded<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const latest = useRef(0);
  // Whether the error shown is a load's (the next load's answer replaces it) rather than a change's.
  const loadFailed = useRef(false);
  // The newest `load` (it closes over the screen's current state: filters, the page asked for).
  const current = useRef(load);
  current.current = load;
  const reload = async () => {
    const n = ++latest.current;
    setLoading(true);
    try {
      const value = await current.current();
      if (n === latest.current) {
        setData(() => value);
        if (loadFailed.current) setError(null);
        loadFailed.current = false;
      }
    } catch (err) {
      if (n === latest.current) {
        setError(explain(err));
        loadFailed.current = true;
      }
    } finally {
      if (n === latest.current) setLoading(false);
    }
  };
  useEffect(() => {
    void reload();
  }, deps);
  const setShown = (message: string | null) => {
    loadFailed.current = false;
    setError(message);
  };
  return { data, error, loading, reload, setError: setShown, setData: (d: T) => setData(() => d) };
}
