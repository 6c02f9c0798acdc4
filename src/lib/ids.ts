const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for a canonical UUID string (what the database's uuid columns accept). */
export function isUuid(value: unknown): boolean {
  return typeof value === 'string' && UUID.test(value);
}
