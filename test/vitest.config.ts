import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';
import HeavyFirstSequencer from './heavy-first-sequencer.js';

const dbSuites = ['test/integration/**/*.test.ts', 'test/api/**/*.test.ts', 'test/cli/**/*.test.ts'];

// The database matrix only where the database matters. A suite runs on both PostgreSQL and the embedded
// PGlite mode when what it checks depends on the backend: migrations and upgrades, the job queue
// (pg-boss, jobs written in their cause's transaction) and the event bus, backup/restore, retention and
// erasure, concurrency and locking, vector search, or cases of its own for the embedded mode
// (`runIf(DB_MODE === 'embedded')`). Every other suite under test/integration, test/api and
// test/cli checks HTTP, CLI or service behaviour that reads the same on either backend: it runs once, on
// PostgreSQL (CI has it, and each embedded start-up costs more). Add a suite here when it starts to
// depend on the backend. TEST_DB_MODE tells the helpers which backend a project runs on.
const bothModes = [
  'test/integration/backup.test.ts',
  'test/integration/crash-recovery.test.ts',
  'test/integration/database.test.ts',
  'test/integration/event-bus.test.ts',
  'test/integration/git-refresh.test.ts',
  'test/integration/memories-search.test.ts',
  'test/integration/migration-pairing-tenant.test.ts',
  'test/integration/migrations.test.ts',
  'test/integration/person-data.test.ts',
  'test/integration/pgboss-upgrade.test.ts',
  'test/integration/retention.test.ts',
  'test/integration/runners.test.ts',
  'test/integration/skills-learning.test.ts',
  'test/integration/spending.test.ts',
  'test/integration/tenants.test.ts',
  'test/integration/upgrade.test.ts',
  'test/integration/worker.test.ts',
  'test/api/admin.test.ts',
  'test/api/codehost-intake.test.ts',
  'test/api/embedders.test.ts',
  'test/api/jobs.test.ts',
  'test/api/memories.test.ts',
  'test/api/sessions-any-serve.test.ts',
  'test/api/sessions-delete-race.test.ts',
  'test/api/sessions-manage.test.ts',
  'test/api/sign-in-links.test.ts',
  'test/cli/cli.test.ts',
  'test/cli/gateway-cli.test.ts',
  'test/cli/person-data-cli.test.ts',
  'test/cli/runtime-cli.test.ts',
  'test/cli/serve.test.ts',
];
// Suites that check the embedded mode only (their describe runs if DB_MODE === 'embedded').
const embeddedOnly = [
  'test/integration/runtime-density.test.ts',
  'test/integration/runtime-paging.test.ts',
  'test/integration/runtime-pool.test.ts',
  'test/cli/init-interactive.test.ts',
  'test/cli/runtime-probe.test.ts',
];
// Suites that start real opencode runtimes in sandboxes (startRuntimeApp): their own project, on
// PostgreSQL, so they can be run alone and scheduled apart. Those also in bothModes run on embedded too.
const runtimeSuites = [
  'test/api/mcp-connectors-agent.test.ts',
  'test/api/memories-agent.test.ts',
  'test/api/model-spending.test.ts',
  'test/api/orchestrate.test.ts',
  'test/api/provider-base-url.test.ts',
  'test/api/scim-deactivation-agent.test.ts',
  'test/api/sessions-permissions.test.ts',
  'test/api/sessions-stop.test.ts',
  'test/api/sessions-tools.test.ts',
  'test/api/sessions-turn.test.ts',
  'test/api/session-changes.test.ts',
  'test/api/session-models-agent.test.ts',
  'test/api/session-shares-runtime.test.ts',
  'test/api/workspace-files.test.ts',
  'test/api/skills.test.ts',
  'test/api/workspace-terminal.test.ts',
  'test/integration/backup.test.ts',
  'test/integration/codehost-run.test.ts',
  'test/integration/crash-recovery.test.ts',
  'test/integration/gateway-loop.test.ts',
  'test/integration/git-connections.test.ts',
  'test/integration/git-gateway.test.ts',
  'test/integration/person-data.test.ts',
  'test/integration/retention.test.ts',
  'test/integration/runner-remote.test.ts',
  'test/integration/runner-moves.test.ts',
  'test/integration/runtime-idle.test.ts',
  'test/integration/sessions-resilience.test.ts',
  'test/integration/turn-lost.test.ts',
  'test/integration/turn-order.test.ts',
];

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
