import { useEffect, useState } from 'preact/hooks';
import { explain } from '../../api';
import { listModels, modelLabel, sessionModel, setSessionModel, type ModelCatalog, type SessionModel } from '../../models-api';

/**
 * The model of a session, by the composer: the models the person's role allows, the
 * session's choice selected ("Default" follows its template's or the workspace's model). "This message
 * only" keeps the session's model and sends the pick with the next prompt alone (`model` of the prompt).
 */
export function useModelPicker(sessionId: string, onError: (message: string) => void) {
  const [catalog, setCatalog] = useState<ModelCatalog | null>(null);
  const [session, setSession] = useState<SessionModel | null>(null);
  const [once, setOnce] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    void Promise.all([listModels(), sessionModel(sessionId)]).then(
      ([c, s]) => {
        if (!live) return;
        setCatalog(c);
        setSession(s);
      },
      () => {},
    );
    return () => {
      live = false;
    };
  }, [sessionId]);
  return {
    catalog,
    session,
    /** The model the next prompt names, if it names one of its own. */
    once,
    sent: () => setOnce(null),
    setOnce,
    async choose(model: string | null) {
      try {
        setSession(await setSessionModel(sessionId, model));
      } catch (err) {
        onError(explain(err));
      }
    },
  };
}

export function ModelPicker(props: { picker: ReturnType<typeof useModelPicker> }) {
  const { catalog, session, once } = props.picker;
  const [onlyNext, setOnlyNext] = useState(false);
  if (!catalog || !session || catalog.models.length < 2) {
    // Nothing to choose: the model is still named, so a person knows what answers them.
    return session?.effective ? <p class="model-pick hint" data-testid="model-pick">Model: {session.effective.model}</p> : null;
  }
  const several = new Set(catalog.models.map((m) => m.provider)).size > 1;
  const inherited = session.templateModel ?? session.defaultModel;
  const value = onlyNext ? (once ?? '') : (session.model ?? '');
  return (
    <div class="model-pick" data-testid="model-pick">
      <label>
        Model{' '}
        <select
          name="model"
          value={value}
          onChange={(e) => {
            const v = e.currentTarget.value || null;
            if (onlyNext) props.picker.setOnce(v);
            else void props.picker.choose(v);
          }}
        >
          <option value="">{onlyNext ? 'The session\'s' : `Default${inherited ? ` (${inherited})` : ''}`}</option>
          {catalog.models.map((m) => (
            <option key={m.ref} value={m.ref}>
              {modelLabel(m, several)}
            </option>
          ))}
        </select>
      </label>
      <label class="only-next">
        <input
          type="checkbox"
          checked={onlyNext}
          onChange={(e) => {
            setOnlyNext(e.currentTarget.checked);
            props.picker.setOnce(null);
          }}
        />{' '}
        this message only
      </label>
    </div>
  );
}
