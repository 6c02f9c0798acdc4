import { useState } from 'preact/hooks';
import { errorField, explain } from '../api';

/**
 * A form's refusal, placed where the user looks: a 400 naming one of the form's `fields` shows under
 * that input (`at(field)`), anything else (403, 409, a field it does not show) in its general note.
 */
export function useRefusal(fields: string[] = []) {
  const [refusal, setRefusal] = useState<{ field?: string; message: string } | null>(null);
  const names = (field: string) => Boolean(refusal?.field && (refusal.field === field || refusal.field.startsWith(`${field}.`)));
  return {
    /** The refusal no input of `fields` shows. */
    general: refusal && !fields.some(names) ? refusal.message : null,
    /** The message for an input of `fields` whose path is `field` or starts with it. */
    at: (field: string) => (names(field) ? refusal!.message : null),
    /** The message naming exactly `field`: a section's own complaint, not those of the inputs within it. */
    only: (field: string) => (refusal?.field === field ? refusal.message : null),
    clear: () => setRefusal(null),
    /** Runs a change; a failure becomes the refusal (placed by its field) and false. */
    async run(change: () => Promise<unknown>): Promise<boolean> {
      try {
        await change();
        setRefusal(null);
        return true;
      } catch (err) {
        setRefusal({ field: errorField(err), message: tidy(explain(err)) });
        return false;
      }
    },
  };
}

/** A schema error's path as the service's own errors name fields: "body/a/b/1 must ..." -> "a.b[1]: must ...". */
const tidy = (message: string) =>
  message.replace(/^body\/([\w/]+) /, (_, path: string) => `${path.replace(/\/(\d+)(?=\/|$)/g, '[$1]').replaceAll('/', '.')}: `);

/** The API's complaint about one input, under it. */
export function FieldError(props: { message: string | null; id?: string }) {
  return props.message ? (
    <span class="field-error" role="alert" id={props.id}>
      {props.message}
    </span>
  ) : null;
}
