import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The container image test: outside the default projects because building the images takes
// minutes. `npm run test:image` builds them (templates/container/build.sh, root and podman needed) and runs it
// (Chromium too: the first hour walks the dashboard).
export default defineConfig({
  root: fileURLToPath(new URL('../..', import.meta.url)),
  test: {
    include: ['test/container/**/*.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 300_000,
    pool: 'forks',
    maxWorkers: 1,
  },
});
