// Provenance page: load /config and /corpora, ask /ask, render the outcome. No framework, no build step.
// What the page says it answers from, and its example questions, come from the served corpora. The answer is
// streamed (each stage as it completes) where the browser can read a fetch body, else asked for as JSON.
import { h, fmtWait, capitalise } from './dom.js';
import { renderResponse } from './render.js';
import { renderProgress, progressText } from './pipeline.js';
import { feedbackBlock } from './feedback.js';
import { sseEvents } from './sse.js';
import { apiKey, keepKey, withKey } from './keys.js';

const UNCOVERED = "Ask something the docs don't cover";
const FALLBACK_CONFIG = { profile: null, turnstileSiteKey: null, maxQuestionChars: 500 };
// The longest the page waits with nothing heard: for a JSON request, the whole answer; for a stream, the next
// event (a model on a CPU may take minutes to answer and still tell its progress every second).
const ASK_TIMEOUT_MS = 90_000;
const WAITING = 'Checking the documents…';
const TURNSTILE_SRC = 'https://challenges.cloudflare.com/turnstile/v0/api.js?render=explicit';

const $ = (id) => document.getElementById(id);
// The conversation a follow-up belongs to, kept for the tab's life so that a reload keeps the thread.
const CONVERSATION_KEY = 'provenance.conversation';
const els = {};
const state = {
  busy: false, token: null, widgetId: null, turnstileReady: false, passages: new Map(), corpora: [], corpus: null, defaultCorpus: null,
  feedback: false, controller: null, cancelled: false, progress: null, ticker: null, conversation: null,
};

document.addEventListener('DOMContentLoaded', init);

async function init() {
  for (const id of ['ask-form', 'question', 'ask-button', 'question-count', 'loading', 'error', 'result',
    'profile', 'turnstile', 'turnstile-note', 'examples-list', 'corpus-select', 'corpus-title',
    'corpus-description', 'progress-line', 'cancel-button', 'thread', 'followup-form', 'followup',
    'followup-button', 'new-conversation']) els[id] = $(id);
  els['cancel-button'].addEventListener('click', cancel);
  els.examples = [];
  els.corpus = document.querySelector('[data-testid="corpus"]');
  els.corpusPick = document.querySelector('[data-testid="corpus-pick"]');
  els['corpus-select'].addEventListener('change', () => selectCorpus(els['corpus-select'].value));
  // The result area: a live summary (verdict + answer or why) and the details (evidence, pipeline).
  els.summary = h('div', { class: 'result__summary', 'aria-live': 'polite' });
  els.details = h('div', { class: 'result__details' });
  els.result.replaceChildren(els.summary, els.details);

  els['ask-form'].addEventListener('submit', (e) => { e.preventDefault(); ask(els.question.value); });
  els.question.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      ask(els.question.value);
    }
  });
  els.question.addEventListener('input', updateCount);
  els['followup-form'].addEventListener('submit', (e) => { e.preventDefault(); ask(els.followup.value, true); });
  els.followup.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      ask(els.followup.value, true);
    }
  });
  els['new-conversation'].addEventListener('click', newConversation);
  showKey();

  applyConfig(FALLBACK_CONFIG);
  const params = new URLSearchParams(window.location.search);
  const [config, corpora] = await Promise.all([loadJson('/config'), loadJson('/corpora')]);
  if (config) applyConfig(config);
  if (corpora) applyCorpora(corpora, params.get('corpus'));

  await restoreThread();

  // A shareable link: /?q=question asks straight away (of ?corpus=name when given).
  const q = params.get('q');
  if (q) {
    els.question.value = q.slice(0, els.question.maxLength);
    updateCount();
    ask(els.question.value);
  }
}

/** A pasted key (web/documents.html) is sent with every request, so its private corpora can be asked here. */
function showKey() {
  const keyed = document.querySelector('[data-testid="keyed"]');
  keyed.hidden = !apiKey();
  $('forget-key').addEventListener('click', () => {
    keepKey(null);
    window.location.reload();
  });
}

async function loadJson(path) {
  try {
    const res = await fetch(path, { headers: withKey({ Accept: 'application/json' }) });
    if (!res.ok) return null;
    return await res.json();
  } catch {
    return null;
  }
}

function applyConfig(cfg) {
  const max = Number.isInteger(cfg.maxQuestionChars) && cfg.maxQuestionChars > 0 ? cfg.maxQuestionChars : 500;
  els.question.maxLength = max;
  updateCount();
  if (cfg.profile) {
    // The model beside the profile: "openai" alone doesn't say which server's model answered.
    const base = cfg.model ? `Profile: ${cfg.profile} · ${cfg.model}` : `Profile: ${cfg.profile}`;
    // Who reads the claims, and whether its scores are calibrated for it: a reader should know both.
    const judge = cfg.judge
      ? ` · judge: ${cfg.judge.model}${cfg.judge.calibrated ? '' : ' (uncalibrated)'}${cfg.judge.failure ? ' (down)' : ''}`
      : '';
    els.profile.textContent = base + judge;
    els.profile.hidden = false;
  }
  state.feedback = cfg.feedback === true;
  if (cfg.turnstileSiteKey && state.widgetId === null && !state.turnstileLoading) loadTurnstile(cfg.turnstileSiteKey);
}

/** The corpora from /corpora: a picker when there is more than one, then the chosen one's name and examples. */
function applyCorpora(data, wanted) {
  state.corpora = Array.isArray(data.corpora) ? data.corpora.filter((c) => c && typeof c.name === 'string') : [];
  state.defaultCorpus = typeof data.default === 'string' ? data.default : null;
  if (!state.corpora.length) return;
  const names = state.corpora.map((c) => c.name);
  const select = els['corpus-select'];
  select.replaceChildren(...state.corpora.map((c) => h('option', { value: c.name, text: c.title || c.name })));
  els.corpusPick.hidden = state.corpora.length < 2;
  els.corpus.hidden = false;
  selectCorpus(names.includes(wanted) ? wanted : (names.includes(data.default) ? data.default : names[0]));
}

function selectCorpus(name) {
  const corpus = state.corpora.find((c) => c.name === name);
  if (!corpus) return;
  state.corpus = corpus.name;
  els['corpus-select'].value = corpus.name;
  els['corpus-title'].textContent = corpus.title || corpus.name;
  els['corpus-description'].textContent = corpus.description || '';
  const examples = Array.isArray(corpus.examples) ? corpus.examples.filter((e) => e && typeof e.question === 'string') : [];
  els.examples = examples.map((e, i) => exampleButton(e, i));
  els['examples-list'].replaceChildren(...els.examples);
  els['examples-list'].closest('.examples').hidden = !examples.length;
}

/** An example the corpus doesn't cover (it shows a refusal) is labelled as such. */
function exampleButton(example, i) {
  const question = example.question.trim();
  const uncovered = example.covered === false;
  const btn = h('button', {
    type: 'button', class: uncovered ? 'example example--uncovered' : 'example', id: `example-${i}`, 'data-testid': `example-${i}`,
    disabled: state.busy,
  }, uncovered ? [h('span', { class: 'example__kicker', text: UNCOVERED }), h('span', { class: 'visually-hidden', text: ': ' })] : null,
  h('span', { class: 'example__q', text: question }));
  btn.addEventListener('click', () => {
    if (state.busy) return;
    els.question.value = question;
    updateCount();
    ask(question);
  });
  return btn;
}

function updateCount() {
  els['question-count'].textContent = `${els.question.value.length} / ${els.question.maxLength}`;
}

/* ---------- asking ---------- */

/* ---------- the conversation: earlier turns above, the follow-up box under the last answer ---------- */

function storedConversation() {
  try { return sessionStorage.getItem(CONVERSATION_KEY); } catch { return null; }
}

function keepConversation(id) {
  state.conversation = id;
  try {
    if (id) sessionStorage.setItem(CONVERSATION_KEY, id);
    else sessionStorage.removeItem(CONVERSATION_KEY);
  } catch { /* storage off: the thread lasts until a reload */ }
  els['followup-form'].hidden = !id;
}

/** The turn just shown moves up into the thread, whole: its verdict, panel, evidence and feedback stay live. */
function keepTurn() {
  if (!els.summary.childNodes.length) return;
  const turn = h('article', { class: 'turn', 'data-testid': 'turn' });
  turn.append(els.summary, els.details);
  els.thread.append(turn);
  els.thread.hidden = false;
  els.summary = h('div', { class: 'result__summary', 'aria-live': 'polite' });
  els.details = h('div', { class: 'result__details' });
  els.result.replaceChildren(els.summary, els.details);
}

/** A question from the main box starts a new conversation: the earlier thread goes. */
function startOver() {
  keepConversation(null);
  els.thread.replaceChildren();
  els.thread.hidden = true;
}

function newConversation() {
  startOver();
  clearResult();
  hideError();
  els.question.focus();
}

/** After a reload: the conversation's turns as the server kept them (each question, what was searched,
 *  the answer or that it was refused), read from GET /conversations/{id}. */
async function restoreThread() {
  const id = storedConversation();
  if (!id) return;
  const data = await loadJson(`/conversations/${encodeURIComponent(id)}`);
  if (!data || !Array.isArray(data.turns) || !data.turns.length) {
    keepConversation(null);
    return;
  }
  els.thread.replaceChildren(...data.turns.map(keptTurn));
  els.thread.hidden = false;
  keepConversation(id);
}

const KEPT_STATUS = { answered: 'Answered', refused: 'Refused: the documents did not support an answer', blocked: 'Blocked' };

function keptTurn(t) {
  const said = t.status === 'answered' && typeof t.answer === 'string'
    ? h('p', { class: 'turn__answer', text: t.answer })
    : null;
  const cites = Array.isArray(t.citations) && t.citations.length
    ? h('p', { class: 'turn__sources', text: `Sources: ${t.citations.map((c) => c.source).join(', ')}` })
    : null;
  return h('article', { class: 'turn turn--kept', 'data-testid': 'turn', 'data-status': t.status },
    h('p', { class: 'turn__question', text: t.question }),
    standaloneLine(t.question, t.standaloneQuestion),
    h('p', { class: 'turn__status', text: KEPT_STATUS[t.status] || t.status }),
    said, cites);
}

/** What was searched, when it is not what was typed (a follow-up made to stand alone). */
function standaloneLine(question, standalone) {
  if (typeof standalone !== 'string' || !standalone || standalone === question) return null;
  return h('p', { class: 'standalone', 'data-testid': 'standalone' },
    h('span', { class: 'standalone__label', text: 'Searched for: ' }), standalone);
}

async function ask(raw, followUp = false) {
  if (state.busy) return;
  const question = String(raw || '').trim();
  hideError();
  if (!question) {
    showError('Type a question first.', '');
    (followUp ? els.followup : els.question).focus();
    return;
  }
  if (followUp && state.conversation) keepTurn();
  else startOver();
  setBusy(true);
  const controller = new AbortController();
  state.controller = controller;
  state.cancelled = false;
  let timer = setTimeout(() => controller.abort(), ASK_TIMEOUT_MS);
  const heard = () => {
    clearTimeout(timer);
    timer = setTimeout(() => controller.abort(), ASK_TIMEOUT_MS);
  };
  try {
    const body = { question };
    if (followUp && state.conversation) body.conversationId = state.conversation;
    // Only with a choice to make, or when the one corpus is not the default: a private corpus never is, so a
    // key's only corpus is named.
    if (state.corpus && (state.corpora.length > 1 || state.corpus !== state.defaultCorpus)) body.corpus = state.corpus;
    const token = await turnstileToken();
    if (token) body.turnstileToken = token;
    // The stream, unless it fails before the answer arrives: then the same question as one JSON request.
    const { res, data } = (await askStreaming(body, controller.signal, heard)) || (await askJson(body, controller.signal));
    const retryAfter = parseRetryAfter(res.headers.get('Retry-After'));
    if (data && typeof data.status === 'string' && data.stages) {
      const corpus = typeof data.corpus === 'string' ? data.corpus : null;
      renderResponse(els.summary, els.details, data, { retryAfter, loadPassage: (id) => loadPassage(id, corpus) });
      const searched = standaloneLine(data.question, data.standaloneQuestion);
      if (searched) els.summary.prepend(searched);
      if (typeof data.conversationId === 'string') {
        keepConversation(data.conversationId);
        if (followUp) {
          els.followup.value = '';
          els.followup.focus();
        }
      }
      // "Was this right?" under an answer or a refusal (web/feedback.js); a blocked request asks nothing.
      const rating = state.feedback ? feedbackBlock(data, sendFeedback) : null;
      if (rating) els.summary.append(rating);
      if (res.status >= 500) showError(errorText(res, data));
    } else {
      clearResult();
      showError(errorText(res, data, retryAfter), res.status >= 400 && res.status < 500 ? '' : undefined);
    }
  } catch (err) {
    clearResult();
    if (state.cancelled) showError('You cancelled the question. Ask again whenever you like.', '');
    else showError(err.name === 'AbortError'
      ? 'The service took too long to answer. Please try again.'
      : "Couldn't reach the service. Check your connection and try again.");
  } finally {
    clearTimeout(timer);
    state.controller = null;
    setBusy(false);
    resetTurnstile();
  }
}

/** POST /feedback, with a Turnstile token of its own: a token is good for one request only. */
async function sendFeedback(body) {
  const token = await turnstileToken();
  try {
    const res = await fetch('/feedback', {
      method: 'POST',
      headers: withKey({ 'Content-Type': 'application/json', Accept: 'application/json' }),
      body: JSON.stringify(token ? { ...body, turnstileToken: token } : body),
    });
    return { res, data: await res.json().catch(() => null) };
  } finally {
    resetTurnstile();
  }
}

async function askJson(body, signal) {
  const res = await fetch('/ask', {
    method: 'POST',
    headers: withKey({ 'Content-Type': 'application/json', Accept: 'application/json' }),
    body: JSON.stringify(body),
    signal,
  });
  return { res, data: await res.json().catch(() => null) };
}

// An `error` event's status, as the same error as JSON would have had.
const STREAM_ERROR_STATUS = { database_unavailable: 503, overloaded: 503 };

/**
 * Ask with `Accept: text/event-stream`: the pipeline panel fills as each stage's event arrives, and the
 * AskResponse comes last. A request the server settles before the pipeline runs comes back as JSON, as
 * always. Null when the stream can't be read or ends without an answer (the caller then asks as JSON).
 */
async function askStreaming(body, signal, heard) {
  if (typeof TextDecoderStream === 'undefined') return null;
  let res;
  try {
    res = await fetch('/ask', {
      method: 'POST',
      headers: withKey({ 'Content-Type': 'application/json', Accept: 'text/event-stream' }),
      body: JSON.stringify(body),
      signal,
    });
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    return null;
  }
  if (!(res.headers.get('Content-Type') || '').startsWith('text/event-stream')) {
    return { res, data: await res.json().catch(() => null) };
  }
  if (!res.body) return null;
  const live = { order: [], records: new Map() };
  try {
    for await (const { event, data } of sseEvents(res.body)) {
      heard();
      if (event === 'progress' && data && typeof data.stage === 'string') {
        showProgress(data);
        continue;
      }
      if (event === 'start') {
        live.order = Array.isArray(data.stages) ? data.stages : [];
        els.summary.replaceChildren();
      } else if (event === 'stage' && data && typeof data.stage === 'string') {
        live.records.set(data.stage, data.record || {});
      } else if (event === 'response') {
        return { res, data };
      } else if (event === 'error') {
        const code = data && data.error && data.error.code;
        return { res: { ok: false, status: STREAM_ERROR_STATUS[code] || 500, headers: res.headers }, data };
      }
      if (event === 'start' || event === 'stage') renderProgress(els.details, live);
    }
  } catch (err) {
    if (err.name === 'AbortError') throw err;
  }
  return null;
}

function errorText(res, data, retryAfter) {
  const e = data && data.error;
  const parts = [];
  if (res.status === 429) parts.push('Too many questions.');
  else if (e && e.code === 'overloaded') parts.push('The service is busy right now.');
  else if (res.status >= 500) parts.push(`The service had a problem (HTTP ${res.status}).`);
  else if (!res.ok) parts.push(`The question was not accepted (HTTP ${res.status}).`);
  else parts.push('The service sent an unexpected reply.');
  if (e && e.message) parts.push(capitalise(e.message.endsWith('.') ? e.message : `${e.message}.`));
  if (retryAfter !== null && retryAfter !== undefined) parts.push(`Try again in ${fmtWait(retryAfter)}.`);
  return parts.join(' ');
}

function parseRetryAfter(value) {
  if (!value) return null;
  const n = Number(value);
  if (Number.isFinite(n)) return Math.max(0, Math.ceil(n));
  const when = Date.parse(value);
  return Number.isNaN(when) ? null : Math.max(0, Math.ceil((when - Date.now()) / 1000));
}

async function loadPassage(id, corpus) {
  // Passage ids are unique within a corpus only.
  const key = `${corpus || ''}\u0000${id}`;
  const query = corpus ? `?corpus=${encodeURIComponent(corpus)}` : '';
  if (!state.passages.has(key)) {
    const p = fetch(`/passages/${encodeURIComponent(id)}${query}`, { headers: withKey({ Accept: 'application/json' }) }).then(async (res) => {
      const data = await res.json().catch(() => null);
      if (!res.ok || !data || typeof data.text !== 'string') {
        throw new Error((data && data.error && data.error.message) || `HTTP ${res.status}`);
      }
      return data;
    });
    p.catch(() => state.passages.delete(key));
    state.passages.set(key, p);
  }
  return state.passages.get(key);
}

/** Closing the stream cancels the question: the server stops its work, frees its slot and settles its spend. */
function cancel() {
  if (!state.controller) return;
  state.cancelled = true;
  state.controller.abort();
}

/** A `progress` event: the line says what runs, and counts its seconds on until the next event. */
function showProgress(progress) {
  state.progress = { ...progress, at: performance.now() };
  const draw = () => {
    const p = state.progress;
    if (!p) return;
    const elapsed = (Number(p.elapsedS) || 0) + (performance.now() - p.at) / 1000;
    els['progress-line'].textContent = progressText(p, elapsed);
  };
  draw();
  if (!state.ticker) state.ticker = setInterval(draw, 1000);
}

function setBusy(busy) {
  state.busy = busy;
  els['ask-button'].disabled = busy;
  els['ask-button'].textContent = busy ? 'Checking…' : 'Ask';
  els['followup-button'].disabled = busy;
  els['new-conversation'].disabled = busy;
  els.examples.forEach((b) => { b.disabled = busy; });
  els['corpus-select'].disabled = busy;
  els.result.setAttribute('aria-busy', String(busy));
  els['ask-form'].setAttribute('aria-busy', String(busy));
  els.loading.hidden = !busy;
  if (!busy) {
    clearInterval(state.ticker);
    state.ticker = null;
    state.progress = null;
    els['progress-line'].textContent = WAITING;
  }
  els.result.classList.toggle('is-stale', busy);
}

function clearResult() {
  els.summary.replaceChildren();
  els.details.replaceChildren();
}

function showError(message, title = 'Something went wrong.') {
  els.error.replaceChildren(title ? h('strong', { text: `${title} ` }) : '', message);
  els.error.hidden = false;
}

function hideError() {
  els.error.hidden = true;
  els.error.replaceChildren();
}

/* ---------- Cloudflare Turnstile (only when the server gives a site key) ---------- */

function loadTurnstile(siteKey) {
  state.turnstileLoading = true;
  els.turnstile.hidden = false;
  const note = (text) => {
    els['turnstile-note'].textContent = text;
    els['turnstile-note'].hidden = !text;
  };
  const fail = (why) => {
    if (state.turnstileReady) return;
    els.turnstile.hidden = true;
    note(`The bot check could not load (${why}). Questions may be refused until it does; try reloading the page.`);
  };
  const script = document.createElement('script');
  script.src = TURNSTILE_SRC;
  script.async = true;
  script.addEventListener('load', () => {
    if (!window.turnstile) return fail('script did not start');
    try {
      state.widgetId = window.turnstile.render(els.turnstile, {
        sitekey: siteKey,
        theme: 'light',
        callback: (t) => { state.token = t; note(''); },
        'expired-callback': () => { state.token = null; },
        'error-callback': () => { state.token = null; note('The bot check reported a problem. Try again, or reload the page.'); },
      });
      state.turnstileReady = true;
      els.turnstile.hidden = false;
      note('');
    } catch (err) {
      fail(err.message || 'render failed');
    }
  });
  script.addEventListener('error', () => fail('network error'));
  setTimeout(() => fail('timed out'), 15_000);
  document.head.append(script);
}

/** Wait briefly for a token if the widget is still solving; never block asking for long. */
async function turnstileToken() {
  if (!state.turnstileReady || state.token) return state.token;
  for (let waited = 0; waited < 8000 && !state.token; waited += 250) {
    await new Promise((r) => setTimeout(r, 250));
  }
  return state.token;
}

function resetTurnstile() {
  if (state.turnstileReady && window.turnstile && state.widgetId !== null) {
    state.token = null;
    try { window.turnstile.reset(state.widgetId); } catch { /* widget gone */ }
  }
}
