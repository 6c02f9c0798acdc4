import { ValidationError } from '../../kernel/errors.js';
import { normaliseHost, normaliseListEntry } from '../runtime/host/egress-policy.js';

/**
 * The rules of a tenant's settings, without I/O: what an admin may set in each area's part of them
 * (egress, skills, memory, privacy, tokens, sign-in, workspace), checked with a 400 naming the field and
 * normalised. The bounds live here, under the tenant, so that the tenant does not import the areas that
 * read its settings (they import the tenant's repo); each area keeps what it uses when a key is unset.
 * What needs the database (role and team names of the group mappings) is checked by tenants.service.ts.
 */

/** The most people a skill proposal may be set to need (`skills.minUsers`; skills/skill-fns.ts MIN_USERS_DEFAULT). */
export const MIN_USERS_MAX = 20;
/** The longest personal token lifetime a tenant may allow (`tokens.maxDays`; tokens/token-fns.ts). */
export const TOKEN_MAX_DAYS_LIMIT = 366;
/** The longest SCIM token lifetime a tenant may allow (`tokens.scimMaxDays`; scim/scim-fns.ts). */
export const SCIM_TOKEN_MAX_DAYS_LIMIT = 366;

/**
 * What happens to the erased person's memories shared with their team or organisation (tenant setting
 * `privacy.sharedMemoriesOnErase`): `remove` (the default: erasure erases what they wrote) or
 * `keep-anonymous` (kept for the others, authored by a pseudonymous placeholder user). Private memories
 * are removed either way.
 */
export const SHARED_MEMORY_POLICIES = ['remove', 'keep-anonymous'] as const;
export type SharedMemoryPolicy = (typeof SHARED_MEMORY_POLICIES)[number];

export interface PrivacySettings {
  sharedMemoriesOnErase?: SharedMemoryPolicy;
}

/** Tenant settings `skills`: the people a proposal needs, and the hosts a learnt skill may name unflagged. */
export interface SkillSettings {
  minUsers?: number;
  allowedHosts?: string[];
}

/**
 * Tenant settings `memory`: `agentSavesNeedRelease`, every memory an agent saves waits (quarantined) for
 * its person's release, whatever it says (the screening's patterns are never complete).
 */
export interface MemorySettings {
  agentSavesNeedRelease?: boolean;
}

/**
 * Tenant settings `signIn`: `applyGroupMapping`, each sign-in sets the roles and teams the person's
 * identity-provider groups map to (groupRoleMapping, groupTeamMapping). Off by default: SPEC.md's sign-in
 * does not apply the mapping.
 */
export interface SignInSettings {
  applyGroupMapping?: boolean;
}

/** Tenant settings `egress`: what the tenant's agents may (allow) or may not (deny) reach, and extra ports. */
export interface EgressSettings {
  allow?: string[];
  deny?: string[];
  ports?: number[];
}

/** The settings an update may send (tenants.service.ts updateSettings). */
export interface TenantSettingsInput {
  groupRoleMapping?: Record<string, string>;
  groupTeamMapping?: Record<string, string>;
  signIn?: SignInSettings;
  egress?: EgressSettings;
  skills?: SkillSettings;
  memory?: MemorySettings;
  privacy?: PrivacySettings;
  tokens?: { maxDays?: number; scimMaxDays?: number };
  workspace?: { quotaMb?: number | null };
}

/** `settings.skills` checked (400 naming the field) and normalised: host names lower-case, `*.` dropped. */
export function skillSettings(input: SkillSettings): SkillSettings {
  const out: SkillSettings = {};
  if (input.minUsers !== undefined) {
    if (!Number.isInteger(input.minUsers) || input.minUsers < 1 || input.minUsers > MIN_USERS_MAX) {
      throw new ValidationError(`settings.skills.minUsers: an integer from 1 to ${MIN_USERS_MAX}`, { details: { field: 'settings.skills.minUsers' } });
    }
    out.minUsers = input.minUsers;
  }
  if (input.allowedHosts !== undefined) {
    out.allowedHosts = input.allowedHosts.map((d, i) => {
      const host = normaliseHost(d.replace(/^\*?\./, ''));
      if (!host) throw new ValidationError(`settings.skills.allowedHosts[${i}]: "${d}" is not a host name`, { details: { field: 'settings.skills.allowedHosts' } });
      return host;
    });
  }
  return out;
}

/** `settings.egress` checked and normalised: entries as the proxy compares them, ports sorted once each; keys left out stay out. */
export function egressSettings(egress: EgressSettings): EgressSettings {
  // Addresses and ranges too: a deny list of names alone is stepped around by dialling the address.
  const entries = (field: 'allow' | 'deny', list: string[]) =>
    list.map((d, i) => {
      const entry = normaliseListEntry(d);
      if (!entry) throw new ValidationError(`settings.egress.${field}[${i}]: "${d}" is not a domain name, an address or a CIDR range`, { details: { field: `settings.egress.${field}` } });
      return entry;
    });
  const ports = (list: number[]) => {
    const bad = list.findIndex((p) => !Number.isInteger(p) || p < 1 || p > 65535);
    if (bad >= 0) throw new ValidationError(`settings.egress.ports[${bad}]: ${String(list[bad])} is not a port (1-65535)`, { details: { field: 'settings.egress.ports' } });
    return [...new Set(list)].sort((a, b) => a - b);
  };
  return {
    ...(egress.allow !== undefined ? { allow: entries('allow', egress.allow) } : {}),
    ...(egress.deny !== undefined ? { deny: entries('deny', egress.deny) } : {}),
    ...(egress.ports !== undefined ? { ports: ports(egress.ports) } : {}),
  };
}

/** `settings.privacy` as an update sends it, checked (400 naming the field). */
export function parsePrivacySettings(input: unknown): PrivacySettings {
  if (!input || typeof input !== 'object' || Array.isArray(input)) throw new ValidationError('settings.privacy: an object', { details: { field: 'settings.privacy' } });
  const out: PrivacySettings = {};
  const policy = (input as Record<string, unknown>).sharedMemoriesOnErase;
  if (policy !== undefined) {
    if (!SHARED_MEMORY_POLICIES.includes(policy as SharedMemoryPolicy)) {
      throw new ValidationError(`settings.privacy.sharedMemoriesOnErase: one of ${SHARED_MEMORY_POLICIES.join(', ')}`, { details: { field: 'settings.privacy.sharedMemoriesOnErase' } });
    }
    out.sharedMemoriesOnErase = policy as SharedMemoryPolicy;
  }
  return out;
}

/**
 * An update's settings checked, in the order the fields are reported (the first fault is the 400), and
 * normalised where a value has one form. `quotaMaxMb`: the operator's AGENTWS_WORKSPACE_QUOTA_MAX in MiB.
 * Each part is undefined when the update leaves it out.
 */
export function checkTenantSettings(settings: TenantSettingsInput | undefined, quotaMaxMb: number) {
  const quotaMb = settings?.workspace?.quotaMb;
  if (quotaMb !== undefined && quotaMb !== null) {
    if (!Number.isInteger(quotaMb) || quotaMb < 100 || quotaMb > quotaMaxMb) {
      throw new ValidationError(`settings.workspace.quotaMb: a whole number of MiB from 100 to ${quotaMaxMb} (the operator's AGENTWS_WORKSPACE_QUOTA_MAX), or null for the default`, { details: { field: 'settings.workspace.quotaMb' } });
    }
  }
  const egress = settings?.egress ? egressSettings(settings.egress) : undefined;
  const skills = settings?.skills ? skillSettings(settings.skills) : undefined;
  const memory = settings?.memory;
  const privacy = settings?.privacy !== undefined ? parsePrivacySettings(settings.privacy) : undefined;
  if (memory?.agentSavesNeedRelease !== undefined && typeof memory.agentSavesNeedRelease !== 'boolean') {
    throw new ValidationError('settings.memory.agentSavesNeedRelease: true or false', { details: { field: 'settings.memory.agentSavesNeedRelease' } });
  }
  const tokens = settings?.tokens;
  if (tokens?.maxDays !== undefined && !(Number.isInteger(tokens.maxDays) && tokens.maxDays >= 1 && tokens.maxDays <= TOKEN_MAX_DAYS_LIMIT)) {
    throw new ValidationError(`settings.tokens.maxDays: an integer from 1 to ${TOKEN_MAX_DAYS_LIMIT}`, { details: { field: 'settings.tokens.maxDays' } });
  }
  if (tokens?.scimMaxDays !== undefined && !(Number.isInteger(tokens.scimMaxDays) && tokens.scimMaxDays >= 1 && tokens.scimMaxDays <= SCIM_TOKEN_MAX_DAYS_LIMIT)) {
    throw new ValidationError(`settings.tokens.scimMaxDays: an integer from 1 to ${SCIM_TOKEN_MAX_DAYS_LIMIT}`, { details: { field: 'settings.tokens.scimMaxDays' } });
  }
  const signIn = settings?.signIn;
  if (signIn?.applyGroupMapping !== undefined && typeof signIn.applyGroupMapping !== 'boolean') {
    throw new ValidationError('settings.signIn.applyGroupMapping: true or false', { details: { field: 'settings.signIn.applyGroupMapping' } });
  }
  return { quotaMb, egress, skills, memory, privacy, tokens, signIn };
}
