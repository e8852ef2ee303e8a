// The Documents page: paste an API key, pick a corpus it may change, upload files (dropped or chosen) and watch
// each one through its upload and its ingest job (its events, else polled) to its outcome, list the corpus's
// documents and remove one after confirming. The key lives in sessionStorage only (web/keys.js). Server text only through textContent.
import { h, fmtInt, capitalise } from './dom.js';
import { apiKey, keepKey, withKey } from './keys.js';
import { sseEvents } from './sse.js';

const $ = (id) => document.getElementById(id);
// How often a job is asked after: a 50 KB file is answerable in seconds, and a poll is one small read.
const POLL_MS = 700;
const OUTCOME = { added: 'Added', unchanged: 'Unchanged: the same bytes are in already', removed: 'Removed', failed: 'Failed' };
const state = { key: null, editable: [], corpus: null };

document.addEventListener('DOMContentLoaded', init);

function init() {
  $('key-form').addEventListener('submit', (e) => { e.preventDefault(); open($('api-key').value.trim()); });
  $('forget-key').addEventListener('click', forget);
  $('docs-corpus').addEventListener('change', () => pick($('docs-corpus').value));
  $('choose-files').addEventListener('click', () => $('file-input').click());
  $('file-input').addEventListener('change', () => {
    const files = [...$('file-input').files];
    $('file-input').value = '';
    if (files.length) upload(files);
  });
  const zone = $('dropzone');
  for (const type of ['dragenter', 'dragover']) {
    zone.addEventListener(type, (e) => { e.preventDefault(); zone.classList.add('is-over'); });
  }
  zone.addEventListener('dragleave', () => zone.classList.remove('is-over'));
  zone.addEventListener('drop', (e) => {
    e.preventDefault();
    zone.classList.remove('is-over');
    const files = [...(e.dataTransfer ? e.dataTransfer.files : [])];
    if (files.length) upload(files);
  });
  const kept = apiKey();
  if (kept) open(kept);
  // Said once the form is ours: Enter pressed before this submits it natively, which reloads the page.
  document.body.dataset.ready = 'true';
}

async function api(path, options = {}) {
  const res = await fetch(path, { ...options, headers: withKey({ Accept: 'application/json', ...(options.headers || {}) }) });
  const data = await res.json().catch(() => null);
  return { res, data };
}

const message = (data, res) => (data && data.error && data.error.message
  ? capitalise(data.error.message) : `The service answered HTTP ${res.status}.`);

/** Check the key with GET /key before keeping it: a mistyped key is said at once, and is never kept. */
async function open(key) {
  const error = $('key-error');
  error.hidden = true;
  if (!key) {
    error.textContent = 'Paste an API key first.';
    error.hidden = false;
    $('api-key').focus();
    return;
  }
  let checked;
  try {
    const res = await fetch('/key', { headers: { Accept: 'application/json', Authorization: `Bearer ${key}` } });
    checked = { res, data: await res.json().catch(() => null) };
  } catch {
    error.textContent = "Couldn't reach the service. Check your connection and try again.";
    error.hidden = false;
    return;
  }
  const { res, data } = checked;
  if (!res.ok || !data || !Array.isArray(data.editable)) {
    keepKey(null);
    error.textContent = res.status === 401 ? 'That key is not known, or it was revoked.' : message(data, res);
    error.hidden = false;
    $('api-key').focus();
    return;
  }
  keepKey(key);
  $('api-key').value = '';
  $('key-form').hidden = true;
  $('workspace').hidden = false;
  $('who').replaceChildren('Key ', h('strong', { text: data.name }), ` · ${data.role}`);
  state.editable = data.editable;
  $('no-corpora').hidden = state.editable.length > 0;
  $('corpus-area').hidden = !state.editable.length;
  if (!state.editable.length) return;
  $('docs-corpus').replaceChildren(...state.editable.map((c) => h('option', {
    value: c.name, text: c.visibility === 'private' ? `${c.title || c.name} (private)` : (c.title || c.name),
  })));
  pick(state.editable.some((c) => c.name === state.corpus) ? state.corpus : state.editable[0].name);
  $('docs-corpus').focus();
}

function forget() {
  keepKey(null);
  state.editable = [];
  state.corpus = null;
  $('workspace').hidden = true;
  $('uploads').replaceChildren();
  $('uploads-area').hidden = true;
  $('documents').replaceChildren();
  $('key-form').hidden = false;
  $('api-key').focus();
}

function pick(name) {
  const corpus = state.editable.find((c) => c.name === name);
  // The same corpus again (a select's change to what it shows): listing it anew would undo a removal being
  // confirmed, and the uploads under way.
  if (!corpus || corpus.name === state.corpus) return;
  state.corpus = corpus.name;
  $('docs-corpus').value = corpus.name;
  $('corpus-name').textContent = corpus.title || corpus.name;
  $('corpus-private').hidden = corpus.visibility !== 'private';
  $('corpus-access').textContent = corpus.visibility === 'private'
    ? 'Private: only keys granted it (and admins) can see or ask it.'
    : 'Public: anyone using the Ask page can ask it.';
  $('uploads').replaceChildren();
  $('uploads-area').hidden = true;
  listDocuments();
}

/* ---------- the corpus's documents ---------- */

async function listDocuments() {
  const corpus = state.corpus;
  $('list-status').textContent = 'Loading…';
  let got;
  try { got = await api(`/corpora/${encodeURIComponent(corpus)}/documents`); } catch { got = null; }
  if (corpus !== state.corpus) return;
  if (!got || !got.res.ok || !got.data || !Array.isArray(got.data.documents)) {
    $('list-status').textContent = got ? message(got.data, got.res) : "Couldn't reach the service.";
    $('documents').replaceChildren();
    return;
  }
  const docs = got.data.documents;
  $('list-status').textContent = docs.length ? `${docs.length} document${docs.length === 1 ? '' : 's'}.` : 'No uploaded documents yet.';
  $('documents').replaceChildren(...docs.map(documentRow));
}

function fmtBytes(n) {
  if (!Number.isFinite(n)) return '';
  if (n < 1024) return `${n} bytes`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

function documentRow(doc) {
  const facts = [doc.format, fmtBytes(doc.bytes)];
  if (Number.isFinite(doc.passages)) facts.push(`${fmtInt(doc.passages)} passage${doc.passages === 1 ? '' : 's'}`);
  if (doc.addedAt) facts.push(`added ${new Date(doc.addedAt).toLocaleString()}`);
  const actions = h('div', { class: 'doc__actions' });
  const row = h('li', { class: 'doc', 'data-testid': 'document', 'data-file-name': doc.fileName },
    h('div', { class: 'doc__about' },
      h('p', { class: 'doc__name', text: doc.fileName }),
      h('p', { class: 'doc__facts', text: facts.filter(Boolean).join(' · ') })),
    actions);
  const removeButton = h('button', {
    type: 'button', class: 'btn btn--quiet btn--small', 'data-testid': 'remove', 'aria-label': `Remove ${doc.fileName}`,
    text: 'Remove',
  });
  removeButton.addEventListener('click', () => confirmRemoval(doc, row, actions, removeButton));
  actions.replaceChildren(removeButton);
  return row;
}

/** Removing asks first, in the row itself: a confirm button takes the focus, Cancel or Escape puts it back. */
function confirmRemoval(doc, row, actions, removeButton) {
  const yes = h('button', { type: 'button', class: 'btn btn--danger btn--small', 'data-testid': 'confirm-remove', text: 'Remove it' });
  const no = h('button', { type: 'button', class: 'btn btn--quiet btn--small', 'data-testid': 'cancel-remove', text: 'Cancel' });
  const question = h('p', { class: 'doc__confirm', role: 'alert', text: `Remove ${doc.fileName} from this corpus?` });
  const back = () => {
    actions.replaceChildren(removeButton);
    removeButton.focus();
  };
  no.addEventListener('click', back);
  actions.addEventListener('keydown', (e) => { if (e.key === 'Escape' && actions.contains(yes)) back(); });
  yes.addEventListener('click', () => remove(doc, row, actions));
  actions.replaceChildren(question, yes, no);
  yes.focus();
}

async function remove(doc, row, actions) {
  const status = h('p', { class: 'doc__status', role: 'status', 'data-testid': 'remove-status', text: 'Removing…' });
  actions.replaceChildren(status);
  let got;
  try {
    got = await api(`/corpora/${encodeURIComponent(state.corpus)}/documents/${encodeURIComponent(doc.id)}`, { method: 'DELETE' });
  } catch { got = null; }
  if (!got || got.res.status !== 202 || !got.data || typeof got.data.jobId !== 'string') {
    status.textContent = got ? `Not removed. ${message(got.data, got.res)}` : "Not removed: couldn't reach the service.";
    status.classList.add('doc__status--bad');
    return;
  }
  const job = await follow(got.data.jobId, (j) => { status.textContent = `Removing… ${jobLine(j)}`; });
  const outcome = job && Array.isArray(job.documents) ? job.documents[0] : null;
  if (job && job.state === 'done' && (!outcome || outcome.status === 'removed')) {
    row.remove();
    $('list-status').textContent = `Removed ${doc.fileName}.`;
    listDocuments();
    $('choose-files').focus();
  } else {
    status.textContent = `Not removed. ${(outcome && outcome.reason) || (job && job.error) || 'The job did not finish.'}`;
    status.classList.add('doc__status--bad');
  }
}

/* ---------- uploading ---------- */

/** One request for the files (one job), each file with its own row: its share of the upload, then the job. */
function upload(files) {
  const corpus = state.corpus;
  $('uploads-area').hidden = false;
  const rows = files.map((file) => uploadRow(file));
  $('uploads').prepend(...rows.map((r) => r.el));
  const form = new FormData();
  for (const file of files) form.append('files', file, file.name);
  // XMLHttpRequest: fetch can't tell how much of a request body is sent.
  const xhr = new XMLHttpRequest();
  xhr.open('POST', `/corpora/${encodeURIComponent(corpus)}/documents`);
  for (const [k, v] of Object.entries(withKey({ Accept: 'application/json' }))) xhr.setRequestHeader(k, v);
  const ends = [];
  files.reduce((sum, f, i) => { ends[i] = sum + f.size; return ends[i]; }, 0);
  xhr.upload.addEventListener('progress', (e) => {
    // Each file's share of the bytes sent, in the order they go (the form's few header bytes aside).
    const sent = e.lengthComputable ? e.loaded * (ends[ends.length - 1] / Math.max(e.total, 1)) : 0;
    rows.forEach((r, i) => {
      const start = i ? ends[i - 1] : 0;
      const part = files[i].size ? Math.min(1, Math.max(0, (sent - start) / files[i].size)) : (sent >= start ? 1 : 0);
      r.set('uploading', `Uploading… ${Math.round(part * 100)}%`, part);
    });
  });
  xhr.addEventListener('load', async () => {
    let data = null;
    try { data = JSON.parse(xhr.responseText); } catch { /* not JSON: said below */ }
    if (xhr.status !== 202 || !data || typeof data.jobId !== 'string') {
      const why = data && data.error && data.error.message ? capitalise(data.error.message) : `HTTP ${xhr.status}`;
      rows.forEach((r) => r.done('failed', `Not uploaded. ${why}`));
      return;
    }
    rows.forEach((r) => r.set('queued', 'Uploaded; waiting for its turn…', null));
    const job = await follow(data.jobId, (j) => rows.forEach((r) => r.set(j.state, jobLine(j), jobShare(j))));
    const outcomes = job && Array.isArray(job.documents) ? job.documents : [];
    rows.forEach((r, i) => {
      // The job keeps the files in the order they were sent; its names are the kept ones (web names may differ).
      const o = outcomes[i];
      if (!job || job.state === 'failed') r.done('failed', `Failed. ${(job && job.error) || 'The job could not run.'}`);
      else if (!o) r.done('failed', 'No outcome came back for this file.');
      else r.done(o.status, o.status === 'failed' ? `Failed: ${o.reason || 'no reason given'}` : (OUTCOME[o.status] || o.status));
    });
    if (corpus === state.corpus) listDocuments();
  });
  xhr.addEventListener('error', () => rows.forEach((r) => r.done('failed', "Not uploaded: couldn't reach the service.")));
  xhr.send(form);
}

function uploadRow(file) {
  const bar = h('progress', { max: '1', value: '0', 'aria-label': `Progress of ${file.name}` });
  const line = h('p', { class: 'upload__line', 'data-testid': 'upload-status', text: 'Starting…' });
  const el = h('li', { class: 'upload', 'data-testid': 'upload', 'data-file-name': file.name, 'data-status': 'uploading' },
    h('p', { class: 'upload__name', text: file.name }), bar, line);
  return {
    el,
    set(status, text, share) {
      el.dataset.status = status;
      line.textContent = text;
      // null: how far along is unknown (queued, or a job that says no counts): the bar runs without a value.
      if (share === null || share === undefined) bar.removeAttribute('value');
      else bar.value = share;
    },
    done(status, text) {
      el.dataset.status = status;
      el.classList.add(`upload--${status}`);
      line.textContent = text;
      bar.remove();
    },
  };
}

/** What the job says it has done: its state, and the counts its progress gives. */
function jobLine(job) {
  const p = job.progress || {};
  const said = [];
  if (Number.isFinite(p.documents)) said.push(`${fmtInt(p.documents)} document${p.documents === 1 ? '' : 's'}`);
  if (Number.isFinite(p.passages)) said.push(`${fmtInt(p.passages)} passages`);
  if (Number.isFinite(p.embedded)) said.push(`${fmtInt(p.embedded)} embedded`);
  // After its switch a job embeds its passages' sentences: the corpus already answers from the new documents.
  if (job.state === 'running' && p.phase === 'sentences') {
    const of = Number.isFinite(p.sentencesToEmbed) ? ` (${fmtInt(p.sentencesEmbedded || 0)} of ${fmtInt(p.sentencesToEmbed)} passages)` : '';
    return `Answerable now; embedding its sentences${of}…`;
  }
  const head = job.state === 'queued' ? 'Waiting for its turn' : job.state === 'running' ? 'Reading and embedding' : capitalise(job.state);
  return said.length ? `${head}: ${said.join(', ')}…` : `${head}…`;
}

function jobShare(job) {
  const p = job.progress || {};
  return Number.isFinite(p.embedded) && Number.isFinite(p.passages) && p.passages > 0 ? Math.min(1, p.embedded / p.passages) : null;
}

/** The job until it is done or failed: its events (GET /jobs/{id}/events), else GET /jobs/{id} every
 *  POLL_MS; null when it can no longer be read. */
async function follow(jobId, onProgress) {
  const streamed = await followEvents(jobId, onProgress);
  return streamed || poll(jobId, onProgress);
}

/** Null when the stream can't be read, or ends before the job does (polling takes over). EventSource can't
 *  send the key, so the stream is a fetch's body. */
async function followEvents(jobId, onProgress) {
  if (typeof TextDecoderStream === 'undefined') return null;
  try {
    const res = await fetch(`/jobs/${encodeURIComponent(jobId)}/events`, { headers: withKey({ Accept: 'text/event-stream' }) });
    if (!res.ok || !res.body || !(res.headers.get('Content-Type') || '').startsWith('text/event-stream')) return null;
    for await (const { event, data } of sseEvents(res.body)) {
      if (event !== 'job' || !data || typeof data.state !== 'string') continue;
      if (data.state === 'done' || data.state === 'failed') return data;
      onProgress(data);
    }
  } catch { /* the stream broke: polling takes over */ }
  return null;
}

async function poll(jobId, onProgress) {
  for (;;) {
    let got;
    try { got = await api(`/jobs/${encodeURIComponent(jobId)}`); } catch { got = null; }
    if (!got || !got.res.ok || !got.data) return null;
    if (got.data.state === 'done' || got.data.state === 'failed') return got.data;
    onProgress(got.data);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}
