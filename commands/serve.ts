import { Flags } from '@oclif/core';
import { BaseCommand } from '../src/cli/base-command.js';
import { openCore } from '../src/cli/open-core.js';
import { untilSignal } from '../src/cli/signals.js';
import { buildApp } from '../src/http/build-app.js';
import { startWorker, type Worker } from '../src/jobs/worker.js';
import { demoModeProblems } from '../src/config/load-config.js';
import { ConfigError } from '../src/kernel/errors.js';
import { createLogger } from '../src/lib/logger.js';
import { isLoopback } from '../src/lib/loopback.js';

export default class Serve extends BaseCommand<typeof Serve> {
  static override summary = 'Run the HTTP API server (and, on the embedded database, the job worker).';
  static override description =
    'Serves the /v1 API, /healthz, /readyz and /metrics (Prometheus). On the embedded database it also hosts the database for other commands and runs the job worker in-process. Stops gracefully on SIGTERM or SIGINT: takes no new jobs, lets the turns its runtimes are running end for up to AGENTWS_SHUTDOWN_TURN_GRACE_SECONDS (a turn still running then ends with turn_lost, on its stream), records the model calls in flight, finishes requests, then exits 0.';
  static override examples = [
    '<%= config.bin %> serve',
    '<%= config.bin %> serve --port 9000',
    'AGENTWS_LOG_LEVEL=debug <%= config.bin %> serve',
  ];
  static override flags = {
    host: Flags.string({ summary: 'Listen address (overrides AGENTWS_HOST).' }),
    port: Flags.integer({ summary: 'Listen port (overrides AGENTWS_PORT; 0 picks a free one).', min: 0, max: 65535 }),
  };
  protected static override needsCore = false;

  async run(): Promise<void> {
    const config = this.appConfig;
    const host = this.flags.host ?? config.server.host;
    // The config was checked with AGENTWS_HOST; --host must keep demo mode on loopback too.
    if (config.auth.allowAnonymous && !isLoopback(host)) {
      throw new ConfigError(demoModeProblems({ host, identityProvider: false }), {
        hint: 'Listen on 127.0.0.1 (behind a reverse proxy for other machines), or turn demo mode off (AGENTWS_ALLOW_ANONYMOUS=false) so callers sign in or use the API key.',
      });
    }
    const log = createLogger(config.logLevel, 1);
    const started = Date.now();
    const opened = await openCore(config, log, { supervise: config.worker.inServe });
    let worker: Worker | undefined;
    let shuttingDown = false;
    const app = await buildApp(opened.core, config, { logger: log });
    const shutdownTimeout = config.server.shutdownTimeoutMs;
    const signal = untilSignal(() => {
      log.warn('second signal: exiting now');
      process.exit(1);
    });

    try {
      const readiness = await opened.core.system.readiness();
      if (!readiness.ready) {
        log.warn({ pending: readiness.pending }, 'database migrations are pending: /readyz answers 503 until `npx aws migrate` runs');
      }
      const address = await app.listen({ host, port: this.flags.port ?? config.server.port });
      // Other control-plane processes reach the runners connected here through this serve (runner-links.ts).
      const port = new URL(address).port;
      // Without AGENTWS_RELAY_URL: the address listened on (an IPv6 one in brackets), or loopback when that is every address.
      const relayHost = isLoopback(host) || host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
      opened.core.fleet.setRelayUrl(config.runtime.relayUrl ?? `http://${relayHost}:${port}`);
      if (config.worker.inServe) {
        worker = await startWorker(opened.core, opened.boss, log, { concurrency: config.worker.concurrency });
      }
      // The runtime starts in the background (about 3 s): the API is up at once, and prompts meanwhile
      // wait in the queue; the session streams connect as soon as it answers.
      opened.core.startRuntime().catch((err) => {
        if (!shuttingDown) log.error({ err: (err as Error).message }, 'the agent runtime did not start; prompts will fail until it does');
      });
      if (!config.secrets.apiKey) {
        log.warn('AGENTWS_API_KEY is not set: local development mode, gateway routes are not protected');
      }
      log.info({ url: address, database: config.database.mode, worker: Boolean(worker), startupMs: Date.now() - started }, 'agentws ready');
    } catch (err) {
      await app.close().catch(() => {});
      await opened.core.stopRuntime().catch(() => {});
      await opened.close();
      throw err;
    }

    const received = await signal;
    shuttingDown = true;
    const graceMs = config.server.shutdownTurnGraceMs;
    log.info({ signal: received, graceMs }, 'shutting down');
    // The whole stop: jobs in flight, the turns' grace, stopping runtimes, requests, the queue's close.
    const limitMs = graceMs + 2 * shutdownTimeout + 5000;
    const force = setTimeout(() => {
      log.error({ timeoutMs: limitMs }, 'shutdown took too long: exiting');
      process.exit(1);
    }, limitMs);
    force.unref();
    // No new turn starts on this serve's runtimes: its worker takes no more jobs (they wait in the queue for
    // another worker, or for this serve's restart) and lets those in flight finish.
    await worker?.pause(shutdownTimeout);
    // The turns its runtimes are running may end meanwhile; their streams go on.
    const running = await opened.core.drainTurns(graceMs);
    if (running) log.warn({ runtimes: running, graceMs }, 'turns still running at the end of the grace: their runtimes are stopped and they end with turn_lost');
    // Model calls in flight recorded, runtimes stopped (what ended their turns is published), then the
    // streams end, once what was published has reached them.
    await opened.core.stopRuntime();
    // Stop taking requests and let those in flight finish, then release what jobs are left.
    await app.close();
    await worker?.stop(shutdownTimeout);
    await opened.close();
    log.info('stopped');
  }
}
