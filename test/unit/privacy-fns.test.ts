import { describe, expect, it } from 'vitest';
import {
  DEFAULT_SHARED_MEMORY_POLICY,
  EXPORT_FILES,
  exportManifest,
  placeholderUser,
  pseudonymOf,
  pseudonymousUuid,
  isAboutPerson,
  scrubAuditEntry,
  sharedMemoryPolicy,
  type ExportCounts,
} from '../../src/core/privacy/privacy-fns.js';

const ann = { id: '0b6f3c5e-9a44-4f0e-8d0e-2f1a7c9b1e01', email: 'Ann.Lee@Acme.example', handle: 'ann', displayName: 'Ann Lee' };
const bob = '7d1e2c3b-4a5f-4e6d-9c8b-1a2b3c4d5e6f';

describe('pseudonyms of an erased person', () => {
  it('are stable for one person, differ between people, tenants and keys, and do not show the id', () => {
    const p = pseudonymOf('key-1', 't1', ann.id);
    expect(p).toMatch(/^erased:[0-9a-f]{12}$/);
    expect(pseudonymOf('key-1', 't1', ann.id)).toBe(p);
    expect(pseudonymOf('key-1', 't1', bob)).not.toBe(p);
    expect(pseudonymOf('key-1', 't2', ann.id)).not.toBe(p);
    expect(pseudonymOf('key-2', 't1', ann.id)).not.toBe(p);
    expect(p).not.toContain(ann.id.slice(0, 8));
  });

  it('have a uuid form (for usage rows) that is a valid, stable version-8 uuid', () => {
    const u = pseudonymousUuid('key-1', 't1', ann.id);
    expect(u).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(pseudonymousUuid('key-1', 't1', ann.id)).toBe(u);
    expect(u).not.toBe(ann.id);
  });

  it('name a placeholder author no identity provider can vouch for', () => {
    const p = placeholderUser('erased:0123456789ab');
    expect(p.handle).toBe('erased-0123456789ab');
    expect(p.email).toBe('erased-0123456789ab@erased.invalid');
    expect(p.displayName).toContain('erased:0123456789ab');
  });
});

describe('scrubbing an audit entry of a person', () => {
  const P = 'erased:abcdefabcdef';

  it('replaces them as the actor and the user recorded', () => {
    const r = scrubAuditEntry({ userId: ann.id, actor: `user:${ann.id}`, target: 'session:s1', details: { requestId: 'r1' } }, ann, P);
    expect(r).toMatchObject({ userId: null, actor: P, target: 'session:s1', details: { requestId: 'r1' }, changed: true });
  });

  it('replaces them as the target, and their id, email (any case), handle and name inside details, keys too', () => {
    const r = scrubAuditEntry(
      {
        userId: bob,
        actor: `user:${bob}`,
        target: `user:${ann.id}`,
        details: { email: 'ann.lee@acme.example', handle: 'ANN', name: 'Ann Lee', note: `moved from ${ann.id} by ann.lee@ACME.example`, list: ['ann', { [ann.id]: true }], n: 3 },
      },
      ann,
      P,
    );
    expect(r.userId).toBe(bob);
    expect(r.actor).toBe(`user:${bob}`);
    expect(r.target).toBe(P);
    expect(r.details).toEqual({ email: P, handle: P, name: P, note: `moved from ${P} by ${P}`, list: [P, { [P]: true }], n: 3 });
    expect(JSON.stringify(r).toLowerCase()).not.toContain('ann');
  });

  it('leaves words that only contain the handle, and entries about someone else, as they were', () => {
    const e = { userId: bob, actor: `user:${bob}`, target: `user:${bob}`, details: { email: 'bob@acme.example', note: 'planning the annual review' } };
    const r = scrubAuditEntry(e, ann, P);
    expect(r.changed).toBe(false);
    expect(r.details).toEqual(e.details);
  });
});

describe('which audit entries are about a person: whole values, never substrings', () => {
  const P = 'erased:abcdefabcdef';
  const al = { id: '1a2b3c4d-0000-4000-8000-00000000a1a1', email: 'al@acme.test', handle: 'al', displayName: 'Al' };
  const entry = (details: Record<string, unknown>, target = 'team:t1') => ({ userId: bob, actor: `user:${bob}`, target, details });

  it("does not take val@'s or al@acme.test.evil's entries for al@acme.test's", () => {
    for (const other of ['val@acme.test', 'VAL@ACME.TEST', 'al@acme.test.evil', 'al@acme.testing', 'al@acme.test-corp.example', 'sal+al@acme.test', 'x.al@acme.test', 'al@acme.test_x']) {
      for (const e of [entry({ email: other }), entry({ note: `invited ${other} to the team` }), entry({ [other]: true }), entry({}, `invite:${other}`)]) {
        expect(isAboutPerson(e, al), `${other} in ${JSON.stringify(e)}`).toBe(false);
        const r = scrubAuditEntry(e, al, P);
        expect(r.changed, `${other} in ${JSON.stringify(e)}`).toBe(false);
        expect(r.details).toEqual(e.details);
        expect(r.target).toBe(e.target);
      }
    }
  });

  it('takes al@acme.test as a whole value, or as a whole word in text, in any case', () => {
    const cases: Array<[Record<string, unknown>, Record<string, unknown>]> = [
      [{ email: 'al@acme.test' }, { email: P }],
      [{ email: 'AL@Acme.Test' }, { email: P }],
      [{ note: 'invited al@acme.test to the team' }, { note: `invited ${P} to the team` }],
      [{ note: 'mail al@acme.test.' }, { note: `mail ${P}.` }],
      [{ note: 'Al <al@acme.test>, val@acme.test' }, { note: `Al <${P}>, val@acme.test` }],
      [{ note: 'to=al@acme.test&cc=al@acme.test.evil' }, { note: `to=${P}&cc=al@acme.test.evil` }],
      [{ list: ['val@acme.test', 'al@acme.test'] }, { list: ['val@acme.test', P] }],
      [{ 'al@acme.test': 1, 'val@acme.test': 2 }, { [P]: 1, 'val@acme.test': 2 }],
    ];
    for (const [details, scrubbed] of cases) {
      const e = entry(details);
      expect(isAboutPerson(e, al), JSON.stringify(details)).toBe(true);
      expect(scrubAuditEntry(e, al, P).details).toEqual(scrubbed);
    }
    expect(scrubAuditEntry(entry({}, 'invite:al@acme.test'), al, P).target).toBe(`invite:${P}`);
  });

  it('takes their id as a whole id only, and the entries recorded as theirs or acted by them', () => {
    const longer = `${al.id}0`;
    expect(isAboutPerson(entry({ note: `ref ${longer}` }), al)).toBe(false);
    expect(isAboutPerson(entry({ note: `ref x${al.id}` }), al)).toBe(false);
    expect(isAboutPerson(entry({ note: `moved ${al.id}.` }), al)).toBe(true);
    expect(isAboutPerson(entry({}, `user:${al.id}`), al)).toBe(true);
    expect(isAboutPerson({ userId: al.id, actor: 'system:cli', target: 'x', details: {} }, al)).toBe(true);
    expect(isAboutPerson({ userId: null, actor: `user:${al.id}`, target: 'x', details: {} }, al)).toBe(true);
    // A handle or name counts only as a whole value: "al" inside "val", "Al" inside "Alice" do not.
    expect(isAboutPerson(entry({ handle: 'al' }), al)).toBe(true);
    expect(isAboutPerson(entry({ handle: 'val', name: 'Alice', note: 'al is here' }), al)).toBe(false);
  });
});

describe('the tenant policy for shared memories', () => {
  it('defaults to remove, and reads what is stored', () => {
    expect(DEFAULT_SHARED_MEMORY_POLICY).toBe('remove');
    expect(sharedMemoryPolicy({})).toBe('remove');
    expect(sharedMemoryPolicy({ privacy: { sharedMemoriesOnErase: 'keep-anonymous' } })).toBe('keep-anonymous');
    expect(sharedMemoryPolicy({ privacy: { sharedMemoriesOnErase: 'bogus' } })).toBe('remove');
  });
});

describe('the export manifest', () => {
  it('lists every file with what it is and its count', () => {
    const counts = Object.fromEntries(Object.keys(EXPORT_FILES).map((k, i) => [k, i])) as ExportCounts;
    const m = exportManifest({ createdAt: new Date('2026-01-02T03:04:05Z'), appVersion: '1.2.3', tenant: { id: 't', slug: 'acme' }, userId: ann.id, counts, warnings: ['w'] });
    expect(m).toMatchObject({ format: 1, kind: 'agentws-person-export', createdAt: '2026-01-02T03:04:05.000Z', userId: ann.id, warnings: ['w'] });
    expect(Object.keys(m.files)).toEqual(Object.keys(EXPORT_FILES));
    expect(m.files['memories.json']).toEqual({ description: EXPORT_FILES['memories.json'], count: counts['memories.json'] });
  });
});
