import { Type } from '@sinclair/typebox';
import type { Core } from '../../../core/create-core.js';
import { ProviderInput, ProviderModel, ProviderPatch } from '../../../core/providers/providers.schemas.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { DateTime, errorResponses } from '../../schemas.js';

export const Provider = Type.Object({
  name: Type.String(),
  kind: Type.String(),
  baseUrl: Type.Union([Type.String(), Type.Null()]),
  models: Type.Array(ProviderModel),
  prices: Type.Record(
    Type.String(),
    Type.Object({ inputPerMTok: Type.Number(), outputPerMTok: Type.Number(), cacheReadPerMTok: Type.Number(), cacheWritePerMTok: Type.Number(), cacheWriteLongPerMTok: Type.Number() }),
    { description: 'Per model id: what its calls are charged, USD per million tokens (its prices, unset cache prices settled by the provider\'s kind; cacheWriteLong: Anthropic\'s one-hour cache)' },
  ),
  enabled: Type.Boolean(),
  hasApiKey: Type.Boolean({ description: 'Whether a key is stored (the key itself is never returned)' }),
  createdAt: DateTime,
  updatedAt: DateTime,
});
const ModelRef = Type.String({ minLength: 3, maxLength: 250, description: '"<provider name>/<model id>"' });
const Applied = Type.Object({ defaultModel: Type.String(), providers: Type.Array(Type.String()) });
const HostLimits = Type.Object(
  {
    memory: Type.Union([Type.String(), Type.Null()], { description: 'cgroup2 or cgroup1: each runtime has a memory limit; null: none (see unavailable.memory)' }),
    memoryMaxBytes: Type.Union([Type.Number(), Type.Null()]),
    processes: Type.Union([Type.String(), Type.Null()], { description: 'cgroup2 or cgroup1: each runtime has a process limit (pids.max)' }),
    processesMax: Type.Union([Type.Number(), Type.Null()]),
    cpu: Type.Union([Type.String(), Type.Null()], { description: 'cgroup2 or cgroup1: equal CPU weights per runtime, the runtimes together below the service' }),
    tmpBytes: Type.Union([Type.Number(), Type.Null()], { description: 'Size of each sandbox\'s /tmp (a tmpfs, in the runtime\'s memory)' }),
    disk: Type.Union([Type.String(), Type.Null()], { description: 'measured: the workspace quota is measured by the host (not enforced by the kernel)' }),
    paging: Type.Optional(Type.Union([Type.String(), Type.Null()], { description: 'cgroup2 or cgroup1: idle runtimes frozen a while are paged out to swap; null: they stay resident (see unavailable.paging)' })),
    pageOutAfterMs: Type.Optional(Type.Union([Type.Number(), Type.Null()], { description: 'Frozen this long, a runtime is paged out (AGENTWS_RUNTIME_PAGEOUT_SECONDS)' })),
    swap: Type.Optional(
      Type.Union([
        Type.Object({
          totalBytes: Type.Number(),
          freeBytes: Type.Number(),
          compressedStoredBytes: Type.Union([Type.Number(), Type.Null()], { description: 'What its compressed pool (zram) stores, uncompressed; null: no zram swap' }),
          compressedUsedBytes: Type.Union([Type.Number(), Type.Null()], { description: 'The memory that pool takes' }),
        }),
        Type.Null(),
      ], { description: 'The host\'s swap' }),
    ),
    freezer: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    freezerUnavailable: Type.Optional(Type.Union([Type.String(), Type.Null()])),
    unavailable: Type.Record(Type.String(), Type.String(), { description: 'Why a limit does not hold there (memory, processes, cpu), why idle runtimes are not paged out (paging), and what the disk quota does not cover (disk)' }),
  },
  { additionalProperties: true },
);
const Person = Type.Object({
  userId: Type.String(),
  handle: Type.String(),
  host: Type.String({ description: 'The host that last read it' }),
  running: Type.Boolean({ description: 'Whether their runtime runs now (memory and processes are read only while it does)' }),
  memoryBytes: Type.Union([Type.Number(), Type.Null()]),
  memoryMaxBytes: Type.Union([Type.Number(), Type.Null()]),
  pids: Type.Union([Type.Integer(), Type.Null()]),
  pidsMax: Type.Union([Type.Integer(), Type.Null()]),
  diskBytes: Type.Union([Type.Number(), Type.Null()], { description: 'Their workspace, runtime home and run directory, as last measured' }),
  diskQuotaBytes: Type.Union([Type.Number(), Type.Null()]),
  diskMeasuredAt: Type.Union([DateTime, Type.Null()]),
  oomKills: Type.Integer({ description: 'Processes the kernel ended at the memory limit since their runtime started' }),
  pidsRefused: Type.Integer({ description: 'Forks refused at the process limit since their runtime started' }),
  near: Type.Array(Type.String(), { description: 'Limits at 80 % or more: memory, processes, disk' }),
  overQuota: Type.Boolean({ description: 'Their files are past the quota: new turns are refused until they are under it' }),
  updatedAt: DateTime,
});
export const RuntimeStatus = Type.Object({
  ready: Type.Boolean({ description: 'Whether prompts can start (else they get 409 runtime_not_ready)' }),
  detail: Type.Optional(Type.String()),
  defaultModel: Type.Union([Type.String(), Type.Null()]),
  applied: Type.Union([
    Type.Object({
      defaultModel: Type.String(),
      providers: Type.Array(Type.String()),
      at: Type.Union([DateTime, Type.Null()]),
      by: Type.Union([Type.String(), Type.Null()]),
      byPerson: Type.Optional(Type.Union([Type.Object({ id: Type.String({ format: 'uuid' }), name: Type.String(), email: Type.String() }), Type.Null()], { description: 'Who applied it, when a person of the tenant: name and email' })),
    }),
    Type.Null(),
  ]),
  pendingChanges: Type.Boolean({ description: 'Providers or the default model changed since the last apply' }),
  runtime: Type.Object({
    sandbox: Type.Union([Type.Literal('on'), Type.Literal('off')], { description: 'off: agents run unsandboxed (AGENTWS_RUNTIME_SANDBOX=off, single-user trials only)' }),
    warning: Type.Optional(Type.String()),
    running: Type.Integer({ description: 'Runtimes of this workspace\'s users running now (one per user, started on demand)' }),
    max: Type.Integer({ description: 'Most runtimes resident at once on the host (AGENTWS_RUNTIME_MAX, by default from the host\'s memory)' }),
    hosts: Type.Array(
      Type.Object({
        hostname: Type.String(),
        pid: Type.Integer({ description: 'The `aws serve` process hosting the runtimes' }),
        capacity: Type.Integer({ description: 'Most runtimes it holds at once' }),
        resident: Type.Integer({ description: 'Runtimes it holds now, of every workspace (ready, frozen or starting)' }),
        frozen: Type.Integer({ description: 'Idle runtimes frozen (no CPU; thawed in milliseconds by their next request), paged-out ones included' }),
        pagedOut: Type.Integer({ description: 'Of the frozen, those paged out to swap (holding a fraction of their memory; their next turn brings back what it touches)' }),
        starting: Type.Integer(),
        busy: Type.Integer({ description: 'Runtimes with a turn running (never stopped to make room)' }),
        runtimesMemoryBytes: Type.Number({ description: 'Memory the runtimes hold: their processes\' private resident memory, and their share of a compressed swap (zram)' }),
        memoryTotalBytes: Type.Number({ description: 'The host\'s memory (its cgroup limit inside a container)' }),
        memoryAvailableBytes: Type.Number({ description: 'Memory available on the host without swapping' }),
        freezer: Type.Union([Type.String(), Type.Null()], { description: 'cgroup2 or cgroup1; null: idle runtimes cannot be frozen there' }),
        limits: Type.Union([HostLimits, Type.Null()], { description: 'Which limits hold the runtimes there, and why not the others; null: reported by a version before limits' }),
        diskTotalBytes: Type.Union([Type.Number(), Type.Null()], { description: 'The data directory\'s filesystem (workspaces, homes; the embedded database)' }),
        diskFreeBytes: Type.Union([Type.Number(), Type.Null()]),
        reportedAt: DateTime,
      }),
      { description: 'The processes hosting agent runtimes (serves, and runner hosts as `runner <name>` with pid 0), as they last reported (within 90 s)' },
    ),
    workspaceQuotaBytes: Type.Union([Type.Number(), Type.Null()], { description: 'Each person\'s workspace quota in this workspace (settings.workspace.quotaMb, else AGENTWS_WORKSPACE_QUOTA); null: none' }),
    people: Type.Array(Person, { description: 'This workspace\'s people whose runtime ran since their host started, against their limits, nearest to one first' }),
  }),
  providers: Type.Array(Provider),
});
export const Template = Type.Object({
  slug: Type.String(),
  name: Type.String(),
  systemPrompt: Type.String(),
  model: Type.Union([Type.String(), Type.Null()]),
  createdAt: DateTime,
  updatedAt: DateTime,
});
const TemplateInput = Type.Object(
  {
    slug: Type.String({ pattern: '^[a-z0-9][a-z0-9-]{0,62}$' }),
    name: Type.String({ minLength: 1, maxLength: 200 }),
    systemPrompt: Type.Optional(Type.String({ maxLength: 100_000 })),
    model: Type.Optional(Type.Union([ModelRef, Type.Null()])),
  },
  { additionalProperties: false },
);
const TemplatePatch = Type.Partial(Type.Omit(TemplateInput, ['slug']), { additionalProperties: false });

/**
 * Providers, the runtime configuration and templates. Provider and runtime mutations are the
 * owner/admin boundary of SPEC.md Authentication 7 (admin.manage_providers); templates are
 * admin.manage_templates, and GET /v1/templates lists those the caller may use.
 */
export async function runtimeRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { runtime, providers, templates } = opts.core;
  const errs = (...s: number[]) => errorResponses(400, 401, 403, ...s);

  app.get('/admin/providers', { schema: { tags: ['runtime'], summary: 'Model providers of the tenant (keys never returned)', response: { 200: Type.Object({ providers: Type.Array(Provider) }), ...errs() } } }, async (req) => ({
    providers: await providers.list(ctxOf(req)),
  }));

  app.post(
    '/admin/providers',
    { schema: { tags: ['runtime'], summary: 'Register a provider; takes effect at the next apply', body: ProviderInput, response: { 201: Type.Object({ provider: Provider }), ...errs(409) } } },
    async (req, reply) => reply.status(201).send({ provider: await providers.add(ctxOf(req), req.body) }),
  );

  app.patch(
    '/admin/providers/:name',
    {
      schema: {
        tags: ['runtime'],
        summary: 'Change a provider (rotate its key, models, base URL, enabled); takes effect at the next apply',
        params: Type.Object({ name: Type.String({ maxLength: 40 }) }),
        body: ProviderPatch,
        response: { 200: Type.Object({ provider: Provider }), ...errs(404) },
      },
    },
    async (req) => ({ provider: await providers.update(ctxOf(req), req.params.name, req.body) }),
  );

  app.delete(
    '/admin/providers/:name',
    { schema: { tags: ['runtime'], summary: 'Remove a provider', params: Type.Object({ name: Type.String({ maxLength: 40 }) }), response: { 204: Type.Null(), ...errs(404) } } },
    async (req, reply) => {
      await providers.remove(ctxOf(req), req.params.name);
      return reply.status(204).send(null);
    },
  );

  app.get('/admin/runtime', { schema: { tags: ['runtime'], summary: 'Runtime status: readiness, applied configuration, reachability', response: { 200: RuntimeStatus, ...errs() } } }, async (req) =>
    runtime.status(ctxOf(req)),
  );

  app.patch(
    '/admin/runtime',
    { schema: { tags: ['runtime'], summary: 'Choose the default model; takes effect at the next apply', body: Type.Object({ defaultModel: ModelRef }, { additionalProperties: false }), response: { 200: RuntimeStatus, ...errs() } } },
    async (req) => {
      await runtime.setDefaultModel(ctxOf(req), req.body.defaultModel);
      return runtime.status(ctxOf(req));
    },
  );

  app.post(
    '/admin/runtime/apply',
    {
      schema: {
        tags: ['runtime'],
        summary: 'Record the providers and default model as applied, then write them to the runtime',
        body: Type.Optional(
          Type.Object(
            {
              defaultModel: Type.Optional(ModelRef),
              prepare: Type.Optional(Type.Boolean({ description: "Also start and prepare the caller's own runtime now, so their first prompt after set-up does not wait for a cold start (the dashboard asks). Best effort: never fails the apply; needs agents.create" })),
            },
            { additionalProperties: false },
          ),
        ),
        response: { 200: Type.Object({ applied: Applied, pushed: Type.Boolean({ description: 'false: recorded, but the runtime could not take it now (see runtimeError); serve writes it when it starts the runtime or reconnects to it' }), runtimeError: Type.Optional(Type.String()) }), ...errs() },
      },
    },
    async (req) => runtime.apply(ctxOf(req), { defaultModel: req.body?.defaultModel, prepare: req.body?.prepare }),
  );

  app.get('/templates', { schema: { tags: ['sessions'], summary: 'Templates the caller may start sessions from', response: { 200: Type.Object({ templates: Type.Array(Template) }), ...errorResponses(401) } } }, async (req) => ({
    templates: await templates.list(ctxOf(req)),
  }));

  app.get('/admin/templates', { schema: { tags: ['runtime'], summary: 'All templates of the tenant (admin.manage_templates)', response: { 200: Type.Object({ templates: Type.Array(Template) }), ...errs() } } }, async (req) => ({
    templates: await templates.listAll(ctxOf(req)),
  }));

  app.post(
    '/admin/templates',
    { schema: { tags: ['runtime'], summary: 'Create a template (admin.manage_templates)', body: TemplateInput, response: { 201: Type.Object({ template: Template }), ...errs(409) } } },
    async (req, reply) => reply.status(201).send({ template: await templates.create(ctxOf(req), req.body) }),
  );

  app.patch(
    '/admin/templates/:slug',
    {
      schema: {
        tags: ['runtime'],
        summary: 'Change a template; existing sessions keep their snapshot (admin.manage_templates)',
        params: Type.Object({ slug: Type.String({ maxLength: 63 }) }),
        body: TemplatePatch,
        response: { 200: Type.Object({ template: Template }), ...errs(404) },
      },
    },
    async (req) => ({ template: await templates.update(ctxOf(req), req.params.slug, req.body) }),
  );

  app.delete(
    '/admin/templates/:slug',
    { schema: { tags: ['runtime'], summary: 'Delete a template (admin.manage_templates)', params: Type.Object({ slug: Type.String({ maxLength: 63 }) }), response: { 204: Type.Null(), ...errs(404) } } },
    async (req, reply) => {
      await templates.remove(ctxOf(req), req.params.slug);
      return reply.status(204).send(null);
    },
  );
}
