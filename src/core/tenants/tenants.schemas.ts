import { ValidationError } from '../../kernel/errors.js';
import { slugify } from '../../lib/slug.js';

export interface SeedTenantInput {
  name: string;
  slug?: string;
  ownerEmail: string;
  ownerHandle?: string;
  ownerDisplayName?: string;
  /** The identity provider's id for this organisation (Entra `tid`); null removes the mapping. */
  externalTenantId?: string | null;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const SLUG = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const HANDLE = /^[a-z0-9][a-z0-9._-]{0,62}$/;

/** Checks and normalises tenant-seed input; reports every problem at once. */
export function parseSeedTenantInput(input: SeedTenantInput): Required<Omit<SeedTenantInput, 'externalTenantId'>> {
  const problems: string[] = [];
  const name = input.name?.trim() ?? '';
  if (!name) problems.push('tenant name must not be empty');
  if (name.length > 200) problems.push('tenant name must be at most 200 characters');
  const slug = (input.slug?.trim() || slugify(name)).toLowerCase();
  if ((name || input.slug) && !SLUG.test(slug)) problems.push(`tenant slug "${slug}" must be 1-63 lower-case letters, digits and dashes`);
  const ownerEmail = input.ownerEmail?.trim() ?? '';
  if (!EMAIL.test(ownerEmail)) problems.push(`owner email "${ownerEmail}" is not an email address`);
  const ownerHandle = (input.ownerHandle?.trim() || ownerEmail.split('@')[0] || '').toLowerCase();
  if (!HANDLE.test(ownerHandle)) problems.push(`owner handle "${ownerHandle}" must be lower-case letters, digits, dots, dashes or underscores`);
  if (problems.length) throw new ValidationError(problems.join('; '), { details: { problems } });
  return { name, slug, ownerEmail, ownerHandle, ownerDisplayName: input.ownerDisplayName?.trim() || ownerHandle };
}
