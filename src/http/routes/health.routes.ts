import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { Core } from '../../core/create-core.js';

const Readiness = Type.Object({
  ready: Type.Boolean(),
  database: Type.Union([Type.Literal('ok'), Type.Literal('unreachable')]),
  migrations: Type.Union([Type.Literal('current'), Type.Literal('pending'), Type.Literal('unknown')]),
  pending: Type.Array(Type.String()),
  agents: Type.Object({
    sandbox: Type.Union([Type.Literal('on'), Type.Literal('off')]),
    available: Type.Boolean({ description: 'false: no agent can run on this host (see problem); the API still serves' }),
    problem: Type.Optional(Type.String()),
    warning: Type.Optional(Type.String()),
    limits: Type.Optional(
      Type.Object({
        memory: Type.Union([Type.String(), Type.Null()], { description: 'cgroup2 or cgroup1: each runtime has a memory limit; null: none here (see unavailable)' }),
        processes: Type.Union([Type.String(), Type.Null()], { description: 'cgroup2 or cgroup1: each runtime has a process limit' }),
        cpu: Type.Union([Type.String(), Type.Null()], { description: 'cgroup2 or cgroup1: equal CPU shares per runtime, below the service' }),
        disk: Type.Union([Type.String(), Type.Null()], { description: 'measured: the workspace quota is measured, not enforced by the kernel' }),
        paging: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 'cgroup2 or cgroup1: idle runtimes are paged out to swap; null: they stay resident (see unavailable.paging)' })),
        unavailable: Type.Record(Type.String(), Type.String(), { description: 'Why a limit does not hold here, why idle runtimes are not paged out (paging), and what the disk quota does not cover' }),
      }),
    ),
  }),
});

/** Liveness and readiness probes for load balancers and systemd/k8s checks (outside /v1: not API). */
export async function healthRoutes(app: FastifyInstance, opts: { core: Core }): Promise<void> {
  app.get(
    '/healthz',
    {
      logLevel: 'warn',
      schema: { tags: ['health'], summary: 'Process is up', response: { 200: Type.Object({ status: Type.Literal('ok') }) } },
    },
    async () => ({ status: 'ok' as const }),
  );
  app.get(
    '/readyz',
    {
      logLevel: 'warn',
      schema: {
        tags: ['health'],
        summary: 'Database reachable and migrations current; whether agents can run, and sandboxed',
        response: { 200: Readiness, 503: Readiness },
      },
    },
    async (_req, reply) => {
      const r = await opts.core.system.readiness();
      return reply.status(r.ready ? 200 : 503).send(r);
    },
  );
}
