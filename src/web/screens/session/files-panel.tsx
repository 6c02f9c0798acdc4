import { useEffect, useRef, useState } from 'preact/hooks';
import { api, explain } from '../../api';
import { ErrorNote, SettingText, when } from '../../components';
import { Code } from '../../highlight';
import type { PaneProps } from './workspace-pane';
import { useLoad } from '../../use-load';
import type { Entry } from '../../wire';

/** Text shown in place up to this size; larger files are downloaded. */
const SHOW_MAX_BYTES = 1024 * 1024;
const IMAGE = /\.(png|jpe?g|gif|webp|bmp|ico|avif)$/i;
const PDF = /\.pdf$/i;
/** Names never shown in place (their bytes could run as a page): downloaded. */
const NEVER_INLINE = /\.(html?|xhtml|svg|xml)$/i;

const fileUrl = (path: string, download = false) => `/v1/workspace/file?path=${encodeURIComponent(path)}${download ? '&download=1' : ''}`;
const archiveUrl = (path: string) => `/v1/workspace/archive?path=${encodeURIComponent(path)}`;
const join = (dir: string, name: string) => (dir ? `${dir}/${name}` : name);
const size = (n: number) => (n < 1024 ? `${n} B` : n < 1024 ** 2 ? `${(n / 1024).toFixed(1)} KiB` : n < 1024 ** 3 ? `${(n / 1024 ** 2).toFixed(1)} MiB` : `${(n / 1024 ** 3).toFixed(1)} GiB`);

type Preview = { path: string; kind: 'text'; text: string } | { path: string; kind: 'image' } | { path: string; kind: 'none'; why: string };

/**
 * The Files tab: the person's own workspace (docs/using/workspace.md, "Files"): browse, open a file (text with syntax
 * colour, images shown, PDFs in a new tab, others downloaded), download a file or a folder as an archive,
 * upload files or a folder into the folder shown. Links the agent made are shown, never followed.
 */
export function FilesPanel(props: PaneProps) {
  const [dir, setDir] = useState('');
  const [preview, setPreview] = useState<Preview | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [reloads, setReloads] = useState(0);
  const filesInput = useRef<HTMLInputElement>(null);
  const folderInput = useRef<HTMLInputElement>(null);
  // The folder shown, read again after an upload or a delete (`reloads`) and when a turn ends.
  const listing = useLoad(() => api<{ entries: Entry[]; truncated: boolean }>('GET', `/workspace/files?path=${encodeURIComponent(dir)}`).then((r) => ({ dir, ...r })), [dir, reloads, props.turnsEnded]);
  // Another folder's listing is not shown under this one's name while it loads.
  const here = listing.data?.dir === dir ? listing.data : null;
  const entries = here?.entries ?? null;
  const truncated = here?.truncated ?? false;
  const { error, setError } = listing;

  // webkitdirectory is not in preact's attribute types: set on the element.
  useEffect(() => {
    folderInput.current?.setAttribute('webkitdirectory', '');
  }, []);

  async function open(e: Entry) {
    const path = join(dir, e.name);
    setError(null);
    if (e.type === 'directory') {
      setPreview(null);
      setDir(path);
      return;
    }
    if (e.type === 'symlink') return setPreview({ path, kind: 'none', why: `A link to ${e.target ?? '?'}: links in your workspace are shown, never followed.` });
    if (e.type !== 'file') return setPreview({ path, kind: 'none', why: 'A device, socket or pipe: not read.' });
    if (e.links && e.links > 1) return setPreview({ path, kind: 'none', why: `This file has ${e.links} hard links: a file linked elsewhere is not read.` });
    if (IMAGE.test(e.name)) return setPreview({ path, kind: 'image' });
    if (PDF.test(e.name)) {
      window.open(fileUrl(path), '_blank', 'noopener');
      return;
    }
    if (NEVER_INLINE.test(e.name) || e.size > SHOW_MAX_BYTES) return setPreview({ path, kind: 'none', why: e.size > SHOW_MAX_BYTES ? `${size(e.size)}: too large to show here.` : 'Web pages and SVG files are downloaded, never shown here.' });
    try {
      const res = await fetch(fileUrl(path), { credentials: 'same-origin' });
      if (!res.ok) {
        const body = await res.json().catch(() => null);
        throw new Error(body?.message ?? res.statusText);
      }
      const bytes = new Uint8Array(await res.arrayBuffer());
      if (bytes.subarray(0, 8000).includes(0)) return setPreview({ path, kind: 'none', why: 'A binary file: download it.' });
      setPreview({ path, kind: 'text', text: new TextDecoder().decode(bytes) });
    } catch (err) {
      setError(explain(err));
    }
  }

  async function upload(files: FileList | null) {
    if (!files?.length) return;
    const form = new FormData();
    // A folder pick gives each file its path under the folder: it keeps its place in the workspace.
    for (const f of Array.from(files)) form.append('files', f, (f as File & { webkitRelativePath?: string }).webkitRelativePath || f.name);
    setBusy(`Uploading ${files.length} file${files.length === 1 ? '' : 's'}…`);
    setError(null);
    try {
      const r = await api<{ files: Array<{ path: string }> }>('POST', `/workspace/files?path=${encodeURIComponent(dir)}`, form);
      setBusy(`Uploaded ${r.files.length} file${r.files.length === 1 ? '' : 's'}.`);
    } catch (err) {
      setBusy(null);
      setError(explain(err));
    }
    if (filesInput.current) filesInput.current.value = '';
    if (folderInput.current) folderInput.current.value = '';
    setReloads((n) => n + 1);
  }

  const crumbs = dir ? dir.split('/') : [];
  return (
    <div class="files-panel">
      <nav class="crumbs" aria-label="Folder">
        <button type="button" class="link" onClick={() => (setDir(''), setPreview(null))}>
          workspace
        </button>
        {crumbs.map((c, i) => (
          <span key={i}>
            /
            <button type="button" class="link" onClick={() => (setDir(crumbs.slice(0, i + 1).join('/')), setPreview(null))}>
              {c}
            </button>
          </span>
        ))}
      </nav>
      <div class="row files-actions">
        <a class="button" href={archiveUrl(dir)} download>
          Download folder
        </a>
        <label class="button">
          Upload files
          <input ref={filesInput} type="file" multiple class="hidden-input" aria-label="Upload files" onChange={(e) => void upload((e.currentTarget as HTMLInputElement).files)} />
        </label>
        <label class="button">
          Upload folder
          <input ref={folderInput} type="file" multiple class="hidden-input" aria-label="Upload folder" onChange={(e) => void upload((e.currentTarget as HTMLInputElement).files)} />
        </label>
      </div>
      {busy ? (
        <p class="hint" role="status">
          <SettingText text={busy} />
        </p>
      ) : null}
      <ErrorNote error={error} onClose={() => setError(null)} />
      {entries === null ? (
        <p class="hint">Loading…</p>
      ) : entries.length === 0 ? (
        <p class="empty">{dir ? 'This folder is empty.' : 'Your workspace has no files yet.'}</p>
      ) : (
        <ul class="file-list" aria-label="Files">
          {entries.map((e) => (
            <li key={e.name} class={`file-${e.type}`}>
              <button type="button" class="link" onClick={() => void open(e)} title={e.type === 'symlink' ? `link to ${e.target}` : when(e.mtime)}>
                {e.type === 'directory' ? '📁 ' : e.type === 'symlink' ? '↪ ' : ''}
                {e.name}
              </button>
              <span class="hint">{e.type === 'file' ? size(e.size) : e.type === 'symlink' ? `→ ${e.target ?? ''}` : ''}</span>
              {e.type === 'file' && !(e.links && e.links > 1) ? (
                <a class="download" href={fileUrl(join(dir, e.name), true)} download aria-label={`Download ${e.name}`}>
                  ⬇
                </a>
              ) : e.type === 'directory' ? (
                <a class="download" href={archiveUrl(join(dir, e.name))} download aria-label={`Download ${e.name} as an archive`}>
                  ⬇
                </a>
              ) : null}
            </li>
          ))}
        </ul>
      )}
      {truncated ? <p class="hint">Only the first 5,000 entries are listed.</p> : null}
      {preview ? (
        <section class="file-preview" aria-label={`File ${preview.path}`}>
          <header>
            <strong>{preview.path}</strong>{' '}
            <a href={fileUrl(preview.path, true)} download>
              Download
            </a>
          </header>
          {preview.kind === 'text' ? (
            <pre>
              <Code text={preview.text} lang={preview.path.split('/').pop()} />
            </pre>
          ) : preview.kind === 'image' ? (
            <img src={fileUrl(preview.path)} alt={preview.path} />
          ) : (
            <p class="hint">{preview.why}</p>
          )}
        </section>
      ) : null}
    </div>
  );
}
