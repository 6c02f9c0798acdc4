import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The order in which the projects' files start: the ones whose files take longest first (real opencode
 * runtimes, then Chromium, then the sandbox probes and the embedded database), the many short files last,
 * so that the run's end is short files filling the workers rather than one long file running alone.
 * Vitest's own order puts projects alphabetically (browser, embedded, postgres, runtime, security, unit):
 * in a clean clone (CI, no results cached), runtime and security files started after the whole postgres
 * project. Within a project the order stays Vitest's (the longest first from the results cache, else the
 * largest file first), and a project's files stay together: a worker is reused only for the next file of
 * the same project (isolate: false), a new one costs a fresh import of the application.
 */
const PROJECT_ORDER = ['runtime', 'browser', 'security', 'embedded', 'postgres', 'unit', 'web'];

export default class HeavyFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (spec: TestSpecification) => {
      const i = PROJECT_ORDER.indexOf(spec.project.name);
      return i === -1 ? PROJECT_ORDER.length : i;
    };
    return sorted
      .map((spec, index) => ({ spec, index }))
      .sort((a, b) => rank(a.spec) - rank(b.spec) || a.index - b.index)
      .map(({ spec }) => spec);
  }
}
