import { probeSandbox } from '../../src/core/runtime/host/sandbox.js';
import { BaseCommand } from '../../src/cli/base-command.js';
import { colors } from '../../src/cli/output.js';
import { formatSize } from '../../src/lib/size.js';

export default class RuntimeStatus extends BaseCommand<typeof RuntimeStatus> {
  static override summary = 'Whether prompts can start: readiness, default model, applied state, pending changes, the hosts\' runtimes (capacity, resident, frozen, paged out, memory, swap), the limits that hold them, and who is near a limit.';
  static override description =
    'Exits 0 whether or not the workspace is ready (check "ready" in --json); it fails only when the status cannot be read. Not ready means prompts fail with runtime_not_ready until an admin applies a provider and a default model. "pendingChanges" means providers or the default model changed since the last apply.';
  static override examples = ['<%= config.bin %> runtime status', '<%= config.bin %> runtime status --tenant acme --json'];
  static override flags = { tenant: BaseCommand.tenantFlag };

  async run(): Promise<void> {
    const core = await this.core();
    const s = await core.runtime.status(await this.tenantCtx(this.flags.tenant));
    this.output(s, () => {
      const c = colors.out;
      const out: string[] = [];
      if (s.ready) out.push(c.green.bold('READY') + ': prompts can start');
      else {
        out.push(`${c.red.bold('NOT READY')}: ${s.detail ?? 'unknown'}`);
        out.push(c.dim('  prompts fail (runtime_not_ready) until an admin runs `npx aws provider add ...` and `npx aws runtime apply --default-model <provider>/<model>`'));
      }
      const applied = s.applied
        ? `${s.applied.defaultModel}; providers ${s.applied.providers.join(', ') || '(none)'}; at ${s.applied.at?.toISOString() ?? '?'} by ${s.applied.by ?? '?'}`
        : 'never';
      // Whether a sandbox can start is a fact of this host: checked here, as serve checks it.
      const probe = s.runtime.sandbox === 'on' ? probeSandbox() : null;
      const sandbox =
        s.runtime.sandbox === 'off'
          ? c.yellow.bold('OFF') + c.yellow(': agents run unsandboxed, with the service\'s files and network in reach (single-user trials only)')
          : probe?.ok
            ? 'on (bubblewrap)'
            : `${c.red.bold('UNAVAILABLE')}: ${probe?.problem}. ${probe?.hint ?? ''}`;
      const rt = `${s.runtime.running} running for this workspace (one per user; at most ${s.runtime.max} on the host)`;
      const gb = (n: number) => `${(n / 1024 ** 3).toFixed(1)} GB`;
      const size = (n: number | null | undefined) => (n === null || n === undefined ? '?' : formatSize(n));
      const hosts = s.runtime.hosts.length
        ? s.runtime.hosts.map(
            (h) =>
              `${h.hostname} (serve pid ${h.pid}): ${h.resident} of ${h.capacity} resident (${h.frozen} frozen${h.pagedOut ? `, ${h.pagedOut} of them paged out` : ''}, ${h.starting} starting, ${h.busy} with a turn), ` +
              `${gb(h.runtimesMemoryBytes)} held by runtimes, ${gb(h.memoryAvailableBytes)} of ${gb(h.memoryTotalBytes)} available; ` +
              (h.freezer ? `idle runtimes frozen (${h.freezer})` : c.yellow('idle runtimes cannot be frozen here (no writable cgroup)')) +
              limitsLine(h.limits, h.diskFreeBytes, h.diskTotalBytes),
          )
        : [c.dim('no `aws serve` hosts runtimes now (none reported in the last 90 s)')];
      /** What holds each runtime on a host, and, in yellow, what does not and why. */
      function limitsLine(l: (typeof s.runtime.hosts)[number]['limits'], free: number | null, total: number | null): string {
        if (!l) return '';
        const held = [
          l.memory ? `memory ${size(l.memoryMaxBytes)} each (${l.memory})` : null,
          l.processes ? `${l.processesMax ?? '?'} processes each (${l.processes})` : null,
          l.cpu ? `equal CPU shares (${l.cpu})` : null,
          l.tmpBytes ? `/tmp ${size(l.tmpBytes)} in memory` : null,
          l.disk ? 'workspace quota measured' : null,
          l.paging ? `idle runtimes paged out to swap after ${Math.round((l.pageOutAfterMs ?? 0) / 1000)} s frozen (${l.paging})` : null,
        ].filter(Boolean);
        const sw = l.swap;
        const swapLine = sw && sw.totalBytes > 0
          ? `\n${' '.repeat(17)}swap: ${size(sw.freeBytes)} free of ${size(sw.totalBytes)}` +
            (sw.compressedStoredBytes !== null && sw.compressedUsedBytes !== null ? ` (compressed: ${size(sw.compressedStoredBytes)} held in ${size(sw.compressedUsedBytes)} of memory)` : '')
          : '';
        const missing = Object.entries(l.unavailable ?? {}).filter(([k]) => k !== 'disk' || !l.disk).map(([k, why]) => `${k}: ${why}`);
        return `\n${' '.repeat(17)}limits: ${held.join(', ') || 'none'}` +
          (missing.length ? `\n${' '.repeat(17)}${c.yellow(`not held: ${missing.join('; ')}`)}` : '') +
          (l.disk && l.unavailable?.disk ? `\n${' '.repeat(17)}${c.yellow(`disk quota: ${l.unavailable.disk}`)}` : '') +
          (free !== null && total ? `\n${' '.repeat(17)}data disk: ${size(free)} free of ${size(total)}` : '') +
          swapLine;
      }
      const near = s.runtime.people.filter((p) => p.near.length || p.overQuota);
      const people = near.length
        ? near.map(
            (p) =>
              `${p.handle}: ` +
              [
                p.running && p.memoryBytes !== null ? `memory ${size(p.memoryBytes)} of ${size(p.memoryMaxBytes)}` : null,
                p.running && p.pids !== null ? `${p.pids} of ${p.pidsMax ?? '?'} processes` : null,
                p.diskBytes !== null ? `disk ${size(p.diskBytes)} of ${size(p.diskQuotaBytes)}` : null,
              ]
                .filter(Boolean)
                .join(', ') +
              (p.overQuota ? c.red(' PAST THE QUOTA: new turns refused') : c.yellow(` near: ${p.near.join(', ')}`)),
          )
        : [c.dim(`no one of this workspace is near a limit${s.runtime.workspaceQuotaBytes !== null ? ` (quota ${size(s.runtime.workspaceQuotaBytes)} each)` : ''}`)];
      const providers = s.providers.map((p) => `${p.name} (${p.kind}, ${p.enabled ? 'enabled' : 'disabled'}, key ${p.hasApiKey ? 'set' : 'none'})`).join(', ') || '(none)';
      const rows: Array<[string, string]> = [
        ['default model', s.defaultModel ?? '(none)'],
        ['applied', applied],
        ['pending changes', s.pendingChanges ? c.yellow('yes') + ': run `npx aws runtime apply`' : 'no'],
        ['sandbox', sandbox],
        ['runtimes', rt],
        ...hosts.map((h, i): [string, string] => [i === 0 ? 'host' : '', h]),
        ...people.map((p, i): [string, string] => [i === 0 ? 'near a limit' : '', p]),
        ['providers', providers],
      ];
      out.push('', ...rows.map(([k, v]) => `${k.padEnd(16)} ${v}`));
      process.stdout.write(out.join('\n') + '\n');
    });
  }
}
