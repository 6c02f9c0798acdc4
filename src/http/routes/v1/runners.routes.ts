import { Type } from '@sinclair/typebox';
import type { Core } from '../../../core/create-core.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';

const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);
const NullableDate = Type.Union([DateTime, Type.Null()]);

const Runner = Type.Object({
  id: Type.String({ format: 'uuid' }),
  name: Type.String(),
  kind: Type.Union([Type.Literal('local'), Type.Literal('remote')], { description: 'local: a serve hosting runtimes itself; remote: an `aws runner` host' }),
  state: Type.Union([Type.Literal('active'), Type.Literal('draining'), Type.Literal('lost'), Type.Literal('offline')], {
    description: 'active: takes placements; draining: its users are being moved, takes none; lost: missed its heartbeats; offline: its token was revoked, or its serve stopped',
  }),
  healthy: Type.Boolean({ description: 'Heard from within the heartbeat timeout (30 s) and active or draining' }),
  capacity: Type.Integer({ description: 'Most runtimes placement counts it to hold: what it reports, capped at its token\'s ceiling' }),
  reportedCapacity: Type.Union([Type.Integer(), Type.Null()], { description: 'What the runner itself last reported (null: a serve\'s local runner)' }),
  maxCapacity: Type.Union([Type.Integer(), Type.Null()], { description: 'Its token\'s ceiling (`aws runner token create --max-capacity`); null: a local runner' }),
  resident: Type.Integer({ description: 'Runtimes it holds now, as of its last heartbeat' }),
  busy: Type.Integer({ description: 'Runtimes with a turn running' }),
  users: Type.Integer({ description: 'Users placed on it (their workspaces live there unless storage is shared)' }),
  heartbeatAt: NullableDate,
  heartbeatAgeMs: Type.Union([Type.Integer(), Type.Null()]),
  heartbeat: Type.String({ description: 'The last heartbeat\'s age, e.g. "3s ago"' }),
  version: Nullable(Type.String()),
  labels: Type.Record(Type.String(), Type.String()),
  address: Nullable(Type.String()),
  sharedStorage: Type.Boolean({ description: 'Mounts the shared storage (AGENTWS_SHARED_STORAGE): any user can move to it with their files' }),
  connected: Type.Boolean({ description: 'A control-plane process holds its channel now' }),
  registeredAt: DateTime,
  connectedAt: NullableDate,
});
const Name = Type.Object({ name: Type.String({ pattern: '^[a-z0-9][a-z0-9._-]{0,62}$' }) });

/**
 * Runner hosts. They serve every tenant, so they are the appliance operator's: these routes
 * answer an owner of the operator's tenant (or the API key, which acts as the operator) and 403 anyone
 * else. Runner tokens are CLI-only (`aws runner token ...`): one lets a machine host any tenant's agents.
 */
export async function runnersRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { runners } = opts.core;
  const errs = (...s: number[]) => errorResponses(400, 401, 403, ...s);

  app.get(
    '/admin/runners',
    {
      schema: {
        tags: ['runners'],
        summary: 'Runner hosts: state, capacity, resident runtimes, users placed, last heartbeat (the operator\'s)',
        response: { 200: Type.Object({ runners: Type.Array(Runner) }), ...errs() },
      },
    },
    async (req) => ({ runners: await runners.list(ctxOf(req)) }),
  );

  app.post(
    '/admin/runners/:name/drain',
    {
      schema: {
        tags: ['runners'],
        summary: 'Drain a runner: no new placements; its idle users move to other runners, running turns finish first (audited runner.drain)',
        params: Name,
        response: { 200: Type.Object({ runner: Runner, users: Type.Integer({ description: 'Users placed on it when the drain began' }) }), ...errs(404, 409) },
      },
    },
    async (req) => {
      const runner = await runners.drain(ctxOf(req), req.params.name);
      return { runner, users: runner.users };
    },
  );

  app.post(
    '/admin/runners/:name/resume',
    {
      schema: {
        tags: ['runners'],
        summary: 'End a drain: the runner takes placements again (audited runner.resume)',
        params: Name,
        response: { 200: Type.Object({ runner: Runner }), ...errs(404, 409) },
      },
    },
    async (req) => ({ runner: await runners.resume(ctxOf(req), req.params.name) }),
  );
}
