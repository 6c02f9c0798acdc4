import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Test suites that touch a database run twice: once on PostgreSQL, once on the embedded PGlite mode
// (TEST_DB_MODE tells the helpers which). Pure unit tests run once.
const dbSuites = ['test/integration/**/*.test.ts', 'test/api/**/*.test.ts', 'test/cli/**/*.test.ts'];

export default defineConfig({
  // Paths below are relative to the repository root, not to this file's folder.
  root: fileURLToPath(new URL('..', import.meta.url)),
  test: {
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Two cores: more workers only make PGlite start-ups fight for CPU.
    maxWorkers: 2,
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      { extends: true, test: { name: 'postgres', include: dbSuites, env: { TEST_DB_MODE: 'postgres' } } },
      { extends: true, test: { name: 'embedded', include: dbSuites, env: { TEST_DB_MODE: 'embedded' } } },
      // Containment (issue 12): real sandboxes and real runtimes. The probes need no database; the
      // model-driven suite runs on PostgreSQL (what the database is plays no part in what it checks).
      { extends: true, test: { name: 'security', include: ['test/security/**/*.test.ts'], env: { TEST_DB_MODE: 'postgres' } } },
      // The web dashboard in a real headless Chromium (issue 16); on PostgreSQL, like the security suite.
      { extends: true, test: { name: 'browser', include: ['test/e2e/**/*.test.ts'], env: { TEST_DB_MODE: 'postgres' } } },
    ],
  },
});
