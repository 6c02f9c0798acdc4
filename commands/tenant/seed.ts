import { Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import { info } from '../../src/cli/output.js';

export default class TenantSeed extends BaseCommand<typeof TenantSeed> {
  static override summary = 'Create a tenant with its four system roles and first owner (idempotent).';
  static override description =
    'Creates the tenant (owner, admin, member and viewer roles included) and its first owner user. Running it again with the same slug changes nothing that exists and only adds what is missing.';
  static override examples = [
    '<%= config.bin %> tenant seed --name "ACME Corp" --owner-email alice@acme.example',
    '<%= config.bin %> tenant seed --name "ACME Corp" --slug acme --owner-email alice@acme.example --owner-handle alice --json',
    '<%= config.bin %> tenant seed --name "ACME Corp" --owner-email alice@acme.example --external-id 72f988bf-86f1-41af-91ab-2d7cd011db47',
  ];
  static override flags = {
    name: Flags.string({ summary: 'Display name of the tenant.', required: true }),
    slug: Flags.string({ summary: 'Short identifier (default: derived from the name).' }),
    'owner-email': Flags.string({ summary: 'Email of the first owner.', required: true }),
    'owner-handle': Flags.string({ summary: 'Handle of the first owner (default: the email\'s local part).' }),
    'owner-name': Flags.string({ summary: 'Display name of the first owner (default: the handle).' }),
    'external-id': Flags.string({ summary: 'The identity provider\'s id of this organisation (Entra: the directory/tenant id), so its users can sign in.' }),
  };

  async run(): Promise<void> {
    const core = await this.core();
    const r = await core.tenants.seedTenant(this.ctx(), {
      name: this.flags.name,
      slug: this.flags.slug,
      ownerEmail: this.flags['owner-email'],
      ownerHandle: this.flags['owner-handle'],
      ownerDisplayName: this.flags['owner-name'],
      externalTenantId: this.flags['external-id'],
    });
    const doc = {
      tenant: { id: r.tenant.id, slug: r.tenant.slug, name: r.tenant.name, externalId: r.tenant.externalTenantId },
      owner: { id: r.owner.id, email: r.owner.email, handle: r.owner.handle },
      created: r.created,
    };
    this.output(doc, () => {
      info(`${r.created.tenant ? 'created' : 'found'} tenant ${r.tenant.slug} (${r.tenant.id})`);
      info(`${r.created.owner ? 'created' : 'found'} owner ${r.owner.email} (${r.owner.id})`);
      if (r.created.roles.length) info(`seeded roles: ${r.created.roles.join(', ')}`);
    });
  }
}
