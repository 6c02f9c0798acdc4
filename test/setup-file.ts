import { trackSuiteOutcome } from './helpers/suite-outcome.js';

// Runs before each test file (vitest.config.ts setupFiles).
trackSuiteOutcome();
