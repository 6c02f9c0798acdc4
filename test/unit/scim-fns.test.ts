import { describe, expect, it } from 'vitest';
import {
  applyGroupPatch,
  applyUserPatch,
  excludesMembers,
  listResponse,
  looksLikeScimToken,
  matchesFilter,
  newScimToken,
  ownerChangeRefusal,
  paging,
  parseFilter,
  parsePatch,
  renderUser,
  SCIM_TOKEN_DEFAULT_DAYS,
  scimMaxDaysOf,
  scimTokenDays,
  userFilterable,
  userFromScim,
  type ScimUserState,
} from '../../src/core/scim/scim-fns.js';

const alice: ScimUserState = { userName: 'alice@acme.example', displayName: 'Alice Liddell', givenName: 'Alice', familyName: 'Liddell', externalId: 'ext-1', active: true };
const code = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    return (err as { code?: string; status?: number }).code;
  }
  return 'no error';
};

describe('SCIM filters', () => {
  const user = userFilterable({ id: 'u1', email: 'alice@acme.example', displayName: 'Alice Liddell', givenName: 'Alice', familyName: 'Liddell', scimExternalId: 'ext-1', deactivatedAt: null, createdAt: new Date() });

  it('parses and matches the filters Entra ID and Okta send', () => {
    expect(parseFilter('userName eq "Alice@Acme.example"')).toEqual([{ attr: 'username', op: 'eq', value: 'Alice@Acme.example' }]);
    expect(matchesFilter(user, parseFilter('userName eq "ALICE@acme.example"'))).toBe(true);
    expect(matchesFilter(user, parseFilter('userName eq "bob@acme.example"'))).toBe(false);
    expect(matchesFilter(user, parseFilter('externalId eq "ext-1"'))).toBe(true);
    expect(matchesFilter(user, parseFilter('emails[type eq "work"].value eq "alice@acme.example"'))).toBe(true);
    expect(matchesFilter(user, parseFilter('urn:ietf:params:scim:schemas:core:2.0:User:userName eq "alice@acme.example"'))).toBe(true);
    expect(matchesFilter(user, parseFilter('userName sw "alice" and active eq true'))).toBe(true);
    expect(matchesFilter(user, parseFilter('active eq false'))).toBe(false);
    expect(matchesFilter(user, parseFilter('externalId pr'))).toBe(true);
    // A quote inside the value survives (JSON string escapes).
    expect(parseFilter('displayName eq "Ops \\"core\\""')[0].value).toBe('Ops "core"');
  });

  it('refuses what it does not support with invalidFilter', () => {
    expect(code(() => parseFilter('userName eq "a" or userName eq "b"'))).toBe('invalidFilter');
    expect(code(() => parseFilter('(userName eq "a")'))).toBe('invalidFilter');
    expect(code(() => parseFilter('userName gt "a"'))).toBe('invalidFilter');
    expect(code(() => parseFilter('userName eq "unterminated'))).toBe('invalidFilter');
    expect(code(() => parseFilter('userName eq'))).toBe('invalidFilter');
    expect(code(() => matchesFilter(user, parseFilter('title eq "x"')))).toBe('invalidFilter');
  });

  it('pages from 1, capping count', () => {
    expect(paging({})).toEqual({ start: 1, count: 200 });
    expect(paging({ startIndex: '0', count: '1000' })).toEqual({ start: 1, count: 200 });
    expect(paging({ startIndex: '3', count: '-1' })).toEqual({ start: 3, count: 0 });
    expect(code(() => paging({ count: 'x' }))).toBe('invalidValue');
    const page = listResponse([1, 2, 3, 4, 5], { start: 2, count: 2 });
    expect(page).toMatchObject({ totalResults: 5, startIndex: 2, itemsPerPage: 2, Resources: [2, 3] });
  });
});

describe('SCIM users', () => {
  it("reads Entra's and Okta's create bodies", () => {
    expect(
      userFromScim({ schemas: [], externalId: 'e-9', userName: 'Bob@Acme.example', active: true, emails: [{ primary: true, type: 'work', value: 'bob@acme.example' }], name: { givenName: 'Bob', familyName: 'Ross' } }),
    ).toEqual({ userName: 'bob@acme.example', displayName: 'Bob Ross', givenName: 'Bob', familyName: 'Ross', externalId: 'e-9', active: true });
    // Okta sends a password and locale it does not need; and "False" as a string comes from Entra.
    expect(userFromScim({ userName: 'c@acme.example', displayName: 'C', password: 'x', locale: 'en-US', active: 'False' })).toMatchObject({ active: false, displayName: 'C', externalId: null });
    expect(code(() => userFromScim({ userName: 'not-an-email' }))).toBe('invalidValue');
    expect(code(() => userFromScim({ displayName: 'x' }))).toBe('invalidValue');
    expect(code(() => userFromScim([]))).toBe('invalidSyntax');
  });

  it("applies Entra's capitalised operations with paths, and Okta's value objects", () => {
    const entra = parsePatch({
      schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
      Operations: [
        { op: 'Replace', path: 'name.givenName', value: 'Alicia' },
        { op: 'Add', path: 'emails[type eq "work"].value', value: 'alicia@acme.example' },
        { op: 'Replace', path: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department', value: 'R&D' },
        { op: 'Replace', path: 'active', value: 'False' },
      ],
    });
    expect(applyUserPatch(alice, entra)).toEqual({ ...alice, givenName: 'Alicia', active: false });
    const okta = parsePatch({ Operations: [{ op: 'replace', value: { active: false } }] });
    expect(applyUserPatch(alice, okta).active).toBe(false);
    // Entra without a path: dotted keys are paths.
    expect(applyUserPatch(alice, parsePatch({ Operations: [{ op: 'Replace', value: { 'name.familyName': 'Pleasance', displayName: 'Alice P' } }] }))).toMatchObject({ familyName: 'Pleasance', displayName: 'Alice P' });
    expect(applyUserPatch(alice, parsePatch({ Operations: [{ op: 'Remove', path: 'externalId' }] })).externalId).toBeNull();
    expect(applyUserPatch(alice, parsePatch({ Operations: [{ op: 'replace', path: 'userName', value: 'ALICE2@acme.example' }] })).userName).toBe('alice2@acme.example');
  });

  it('refuses bad operations with SCIM error types', () => {
    expect(code(() => parsePatch({ Operations: [] }))).toBe('invalidSyntax');
    expect(code(() => parsePatch({ Operations: [{ op: 'move', path: 'x' }] }))).toBe('invalidSyntax');
    expect(code(() => parsePatch({ Operations: [{ op: 'remove' }] }))).toBe('noTarget');
    expect(code(() => applyUserPatch(alice, parsePatch({ Operations: [{ op: 'replace', path: 'active', value: 'maybe' }] })))).toBe('invalidValue');
    expect(code(() => applyUserPatch(alice, parsePatch({ Operations: [{ op: 'remove', path: 'userName' }] })))).toBe('mutability');
    expect(code(() => applyUserPatch(alice, parsePatch({ Operations: [{ op: 'replace', value: 'x' }] })))).toBe('invalidValue');
  });

  it('renders a user as a SCIM resource with active from deactivation', () => {
    const at = new Date('2026-01-02T03:04:05Z');
    const r = renderUser({ id: 'u1', email: 'a@b.example', displayName: 'A', givenName: 'A', familyName: '', scimExternalId: null, deactivatedAt: at, createdAt: at }, 'https://x/scim/v2');
    expect(r).toMatchObject({ id: 'u1', userName: 'a@b.example', active: false, emails: [{ value: 'a@b.example', type: 'work', primary: true }], meta: { resourceType: 'User', location: 'https://x/scim/v2/Users/u1' } });
    expect(r).not.toHaveProperty('externalId');
  });
});

describe('SCIM groups', () => {
  const g = { displayName: 'Ops', externalId: null, members: ['a', 'b'] };
  it("adds, removes and replaces members the ways Entra and Okta send them", () => {
    expect(applyGroupPatch(g, parsePatch({ Operations: [{ op: 'Add', path: 'members', value: [{ value: 'c' }, { value: 'a' }] }] })).members).toEqual(['a', 'b', 'c']);
    expect(applyGroupPatch(g, parsePatch({ Operations: [{ op: 'Remove', path: 'members[value eq "a"]' }] })).members).toEqual(['b']);
    expect(applyGroupPatch(g, parsePatch({ Operations: [{ op: 'remove', path: 'members', value: [{ value: 'b' }] }] })).members).toEqual(['a']);
    expect(applyGroupPatch(g, parsePatch({ Operations: [{ op: 'replace', path: 'members', value: [{ value: 'z' }] }] })).members).toEqual(['z']);
    expect(applyGroupPatch(g, parsePatch({ Operations: [{ op: 'remove', path: 'members' }] })).members).toEqual([]);
    expect(applyGroupPatch(g, parsePatch({ Operations: [{ op: 'replace', value: { id: 'x', displayName: 'Ops 2' } }] })).displayName).toBe('Ops 2');
    expect(code(() => applyGroupPatch(g, parsePatch({ Operations: [{ op: 'Add', path: 'members', value: [{ display: 'no id' }] }] })))).toBe('invalidValue');
    expect(code(() => applyGroupPatch(g, parsePatch({ Operations: [{ op: 'Remove', path: 'members[display eq "a"]' }] })))).toBe('invalidPath');
  });
  it('reads excludedAttributes', () => {
    expect(excludesMembers('members')).toBe(true);
    expect(excludesMembers('meta, Members')).toBe(true);
    expect(excludesMembers(undefined)).toBe(false);
  });
});

describe('SCIM tokens', () => {
  it('have a recognisable prefix and shape', () => {
    const t = newScimToken();
    expect(t.startsWith('agentws_scim_')).toBe(true);
    expect(looksLikeScimToken(t)).toBe(true);
    expect(looksLikeScimToken(`${t}x`)).toBe(false);
    expect(looksLikeScimToken('agwr_abc')).toBe(false);
  });
});

describe('what an identity provider may do to an owner', () => {
  const refusal = (next: Partial<ScimUserState>, before: ScimUserState = alice) => ownerChangeRefusal(before, { ...before, ...next }, 'alice@acme.example');

  it('refuses deactivating an owner and changing their userName', () => {
    expect(refusal({ active: false })).toMatch(/owner.*cannot deactivate/);
    expect(refusal({ userName: 'mallory@evil.example' })).toMatch(/owner.*cannot change their userName/);
    expect(refusal({ userName: 'mallory@evil.example', active: false })).toMatch(/userName/);
  });

  it('lets it keep names and its own key in step, change only the case, reactivate, and leave a deactivated owner so', () => {
    expect(refusal({ displayName: 'Alice L.', givenName: 'Al', familyName: 'L', externalId: 'ext-2' })).toBeNull();
    expect(refusal({ userName: 'Alice@Acme.Example' })).toBeNull();
    expect(refusal({ active: true }, { ...alice, active: false })).toBeNull();
    expect(refusal({ active: false }, { ...alice, active: false })).toBeNull();
  });
});

describe('SCIM token lifetimes', () => {
  it('default to 180 days within the maximum, which is the tenant setting tokens.scimMaxDays or 365', () => {
    expect(scimMaxDaysOf({})).toBe(365);
    expect(scimMaxDaysOf({ tokens: { maxDays: 7, scimMaxDays: 30 } })).toBe(30);
    expect(scimMaxDaysOf({ tokens: { scimMaxDays: 9999 } })).toBe(365);
    expect(scimTokenDays(undefined, 365)).toBe(SCIM_TOKEN_DEFAULT_DAYS);
    expect(scimTokenDays(undefined, 30)).toBe(30);
    expect(scimTokenDays(0.5, 30)).toBe(0.5);
  });

  it('refuse a lifetime of nothing, below nothing or past the maximum, naming expiresInDays', () => {
    for (const bad of [0, -1, 31, Number.NaN, '30']) {
      try {
        scimTokenDays(bad, 30);
        expect.unreachable(String(bad));
      } catch (err) {
        expect((err as { details?: unknown }).details).toMatchObject({ field: 'expiresInDays', maxDays: 30 });
      }
    }
  });
});
