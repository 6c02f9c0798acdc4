import { beforeAll, describe, expect, it } from 'vitest';
import { CONTAINMENT_PROBES } from '../../src/core/runtime/host/containment-probes.js';
import { runContainmentProbes, type ContainmentReport } from '../../src/core/runtime/host/containment-runner.js';

/**
 * Every containment probe on a real bubblewrap sandbox with the real egress proxy (no runtime, no
 * database): the probes run once, then one `it` per probe, so a failure names what got through.
 * Run alone: npx vitest run --config test/vitest.config.ts test/security/containment-sandbox.test.ts
 */
describe('containment probes on a real sandbox', { timeout: 180_000 }, () => {
  let report: ContainmentReport;
  beforeAll(async () => {
    report = await runContainmentProbes();
  }, 300_000);

  it('a sandbox can start on this host (bubblewrap, socat, user namespaces)', () => {
    expect(report.sandbox, report.sandbox.problem).toMatchObject({ ok: true });
  });

  it('runs at least 30 containment probes and the legitimate tasks', () => {
    expect(CONTAINMENT_PROBES.filter((p) => p.kind === 'contain' && !p.needs).length).toBeGreaterThanOrEqual(30);
    expect(report.results.map((r) => r.id).sort()).toEqual(CONTAINMENT_PROBES.filter((p) => !p.needs).map((p) => p.id).sort());
  });

  for (const probe of CONTAINMENT_PROBES.filter((p) => !p.needs)) {
    it(`${probe.kind === 'legit' ? 'works' : 'contained'}: ${probe.id} (${probe.tries})`, () => {
      const r = report.results.find((x) => x.id === probe.id);
      expect(r, 'probe did not run').toBeDefined();
      expect(r!.passed, r!.detail).toBe(true);
    });
  }
});
