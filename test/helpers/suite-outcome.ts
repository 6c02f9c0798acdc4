import { beforeAll } from 'vitest';

/**
 * Whether the running test file has failed so far: a test failed, or a hook (beforeAll of a describe)
 * threw. Read by TestEnv.cleanup() to keep a failed suite's database for inspection. The file's task
 * is taken by a beforeAll registered from the setup file (vitest.config.ts setupFiles), which vitest
 * runs before each test file; the test files' own afterAll hooks run before cleanup is decided.
 */
interface TaskLike {
  result?: { state?: string; errors?: unknown[] };
  tasks?: TaskLike[];
}
const KEY = Symbol.for('agentws.test.fileTask');
const store = globalThis as unknown as Record<symbol, TaskLike | undefined>;

export function trackSuiteOutcome(): void {
  // vitest passes hooks a fixture context first (it insists on a destructuring pattern), the file second.
  // biome-ignore lint/correctness/noEmptyPattern: see above
  beforeAll(({}, file) => {
    store[KEY] = file as TaskLike;
  });
}

const failed = (t: TaskLike): boolean => t.result?.state === 'fail' || (t.result?.errors?.length ?? 0) > 0 || (t.tasks ?? []).some(failed);

export function suiteHasFailed(): boolean {
  const file = store[KEY];
  return file !== undefined && failed(file);
}
