import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';
import HeavyFirstSequencer from './heavy-first-sequencer.js';

// Which project runs a file is said by its name, so a new file needs no list kept by hand:
//   name.test.ts           once, on PostgreSQL (project postgres): HTTP, CLI or service behaviour that
//                          reads the same on either backend (CI has PostgreSQL; each embedded start-up costs more)
//   name.both.test.ts      on PostgreSQL and on the embedded PGlite mode (projects postgres and embedded):
//                          what it checks depends on the backend (migrations and upgrades, the job queue and
//                          the event bus, backup/restore, retention and erasure, concurrency and locking,
//                          vector search, or cases of its own for the embedded mode, runIf(DB_MODE === 'embedded'))
//   name.embedded.test.ts  on the embedded mode only (its describe runs if DB_MODE === 'embedded')
//   name.runtime.test.ts   starts real opencode runtimes in sandboxes (startRuntimeApp): project runtime, on
//                          PostgreSQL, so those files can be run alone and scheduled apart
//   name.runtime.both.test.ts  the same, and on the embedded mode too (project embedded)
// under test/integration, test/api and test/cli. Rename a file when it starts (or stops) depending on the
// backend or starting runtimes. TEST_DB_MODE tells the helpers which backend a project runs on.
const dbDirs = ['test/integration', 'test/api', 'test/cli'];
const inDbDirs = (...suffixes: string[]) => dbDirs.flatMap((dir) => suffixes.map((suffix) => `${dir}/**/*${suffix}`));
const dbSuites = inDbDirs('.test.ts');
const embeddedOnly = inDbDirs('.embedded.test.ts');
const runtimeSuites = inDbDirs('.runtime.test.ts', '.runtime.both.test.ts');
const bothModes = inDbDirs('.both.test.ts');

export default defineConfig({
  // Paths below are relative to the repository root, not to this file's folder.
  root: fileURLToPath(new URL('..', import.meta.url)),
  test: {
    globalSetup: ['test/global-setup.ts'],
    // Tracks whether a file has failed, so its databases are kept for inspection (test/helpers/suite-outcome.ts).
    setupFiles: ['test/setup-file.ts'],
    // A test's own bound, for one that hangs. Tests that start processes (serve, runtimes, the CLI) take
    // 2-3x longer on a slow VM under a full run's load than alone: `aws serve`'s restart test took 54 s
    // of 60 in one clean-clone run here. Only a hung test waits longer for it.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // expect.poll waits for something a user would wait for (a page's first render, a job's end). Vitest's
    // default gives up after 1 s, which a loaded 2-core CI machine overran: the dashboard's sign-in link
    // once took longer to render, and every test after it in the file failed with it. 10 s still fails
    // fast next to the 60 s a test may take.
    expect: { poll: { timeout: 10_000 } },
    pool: 'forks',
    // Test files share their worker's process and module graph instead of each re-importing the app's
    // modules (the import cost ~1.5 s a file under load, ~15 % of a database project's time). Measured
    // on a 2-core VM the same day: the whole suite 871 s isolated, 637 s shared, all passing. What this
    // asks of a test file: leave the process as it found it (env, cwd, timers, servers and cores closed
    // in afterAll), as the helpers do; state of a file's own lives in its describe, not at module level.
    isolate: false,
    // Three on two cores: most suites spend their time waiting (on runtimes, sandboxes, timeouts, other
    // processes), so a third file overlaps that waiting. Measured on this 2-core VM the same day: the whole
    // suite 576 s with two, 490 s with three, all passing (PGlite start-ups, which fought for CPU, are now
    // copies of one migrated data dir).
    maxWorkers: 3,
    // The longest projects' files first, the short ones last (test/heavy-first-sequencer.ts).
    sequence: { sequencer: HeavyFirstSequencer },
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      { extends: true, test: { name: 'postgres', include: dbSuites, exclude: [...configDefaults.exclude, ...embeddedOnly, ...runtimeSuites], env: { TEST_DB_MODE: 'postgres' } } },
      { extends: true, test: { name: 'embedded', include: [...bothModes, ...embeddedOnly], env: { TEST_DB_MODE: 'embedded' } } },
      { extends: true, test: { name: 'runtime', include: runtimeSuites, env: { TEST_DB_MODE: 'postgres' } } },
      // Containment: real sandboxes and real runtimes. The probes need no database; the
      // model-driven suite runs on PostgreSQL (what the database is plays no part in what it checks).
      { extends: true, test: { name: 'security', include: ['test/security/**/*.test.ts'], env: { TEST_DB_MODE: 'postgres' } } },
      // The dashboard's components in-process, in the test DOM (happy-dom, per file): no server, no browser.
      { extends: true, test: { name: 'web', include: ['test/web/**/*.test.tsx'] } },
      // The web dashboard in a real headless Chromium; on PostgreSQL, like the security suite.
      { extends: true, test: { name: 'browser', include: ['test/e2e/**/*.test.ts'], env: { TEST_DB_MODE: 'postgres' } } },
    ],
  },
});
