import { Type } from '@sinclair/typebox';
import type { Core } from '../../../core/create-core.js';
import { MAX_RETENTION_DAYS } from '../../../core/retention/retention-fns.js';
import type { App } from '../../app-type.js';
import { ctxOf } from '../../plugins/auth.js';
import { errorResponses } from '../../schemas.js';

const Days = Type.Union([Type.Integer({ minimum: 1, maximum: MAX_RETENTION_DAYS }), Type.Null()], { description: 'Days; null: kept forever' });
const Periods = Type.Object({
  sessions: Days,
  usage: Days,
  trajectories: Days,
  audit: Days,
});
const View = Type.Object({
  retention: Periods,
  auditFloorDays: Type.Integer({ description: 'The shortest audit-log period this appliance allows (AGENTWS_AUDIT_RETENTION_FLOOR_DAYS)' }),
});

/** The tenant's retention periods: read and changed by its admins; the daily job enforces them. */
export async function retentionRoutes(app: App, opts: { core: Core }): Promise<void> {
  const { retention } = opts.core;

  app.get(
    '/admin/retention',
    { schema: { tags: ['admin'], summary: 'The tenant\'s retention periods in days, null meaning kept forever (admin.manage_tenant)', response: { 200: View, ...errorResponses(401, 403) } } },
    async (req) => {
      const v = await retention.show(ctxOf(req));
      return { retention: v.periods, auditFloorDays: v.auditFloorDays };
    },
  );

  app.put(
    '/admin/retention',
    {
      schema: {
        tags: ['admin'],
        summary:
          'Change the tenant\'s retention periods (admin.manage_tenant): sessions (by last activity, with their transcripts in the runtime), usage records, trajectories (what learned skills are learnt from) and the audit log (not under auditFloorDays), in days, null to keep forever; keys left out keep their value. A daily job removes what is older.',
        body: Type.Object(
          { sessions: Type.Optional(Days), usage: Type.Optional(Days), trajectories: Type.Optional(Days), audit: Type.Optional(Days) },
          { additionalProperties: false },
        ),
        response: { 200: View, ...errorResponses(400, 401, 403) },
      },
    },
    async (req) => {
      const v = await retention.set(ctxOf(req), req.body);
      return { retention: v.periods, auditFloorDays: v.auditFloorDays };
    },
  );
}
