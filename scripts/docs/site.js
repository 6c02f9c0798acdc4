// The /docs pages' search (scripts/build-docs.ts): plain-text search over every page's sections, in the
// page itself. The index is a file of the build (fetched from this origin on first use); results are built
// with DOM calls, never as HTML.
const form = document.querySelector('form.search');
const input = form?.querySelector('input');
const results = document.querySelector('section.results');
let index = null;

async function load() {
  index ??= fetch(form.dataset.index).then((r) => r.json());
  return index;
}

function snippet(text, word) {
  const at = text.toLowerCase().indexOf(word);
  if (at < 0) return text.slice(0, 160);
  const start = Math.max(0, at - 60);
  return `${start ? '…' : ''}${text.slice(start, at + 100)}…`;
}

async function search(query) {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) {
    results.hidden = true;
    return;
  }
  const sections = await load();
  const scored = [];
  for (const s of sections) {
    const head = `${s.page} ${s.heading}`.toLowerCase();
    const body = s.text.toLowerCase();
    if (!words.every((w) => head.includes(w) || body.includes(w))) continue;
    scored.push([words.reduce((n, w) => n + (head.includes(w) ? 10 : 0) + (body.includes(w) ? 1 : 0), 0), s]);
  }
  scored.sort((a, b) => b[0] - a[0]);
  results.replaceChildren();
  const title = document.createElement('strong');
  title.textContent = scored.length ? `${scored.length} section${scored.length === 1 ? '' : 's'} match "${query}"` : `Nothing matches "${query}"`;
  const list = document.createElement('ol');
  for (const [, s] of scored.slice(0, 25)) {
    const li = document.createElement('li');
    const a = document.createElement('a');
    a.href = s.url;
    a.textContent = s.heading === s.page ? s.page : `${s.heading} (${s.page})`;
    const p = document.createElement('p');
    p.textContent = snippet(s.text, words[0]);
    li.append(a, p);
    list.append(li);
  }
  results.append(title, list);
  results.hidden = false;
}

if (form && input && results) {
  let timer = 0;
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => search(input.value.trim()), 120);
  });
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    search(input.value.trim());
  });
  // /docs?q=… (the form without script, or a shared link) searches at once.
  const q = new URLSearchParams(location.search).get('q');
  if (q) {
    input.value = q;
    search(q);
  }
}
