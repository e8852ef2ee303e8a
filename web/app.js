// Provenance page: load /config, ask /ask, render the outcome. No framework, no build step.
import { h, fmtWait } from './dom.js';
import { renderResponse } from './render.js';

const UNCOVERED = "Ask something the docs don't cover";
const FALLBACK_CONFIG = {
  profile: null,
  turnstileSiteKey: null,
  maxQuestionChars: 500,
  examples: [
    'How much does a standard locker cost per month?',
    'What are the opening hours on Saturday?',
    `${UNCOVERED}: is there car parking for members?`,
  ],
};
const ASK_TIMEOUT_MS = 90_000;
const TURNSTILE_SRC = 'https://challenges.cloudflare.com/turnstile/v0/api.js?render=explicit';

const $ = (id) => document.getElementById(id);
const els = {};
const state = { busy: false, token: null, widgetId: null, turnstileReady: false, passages: new Map() };

document.addEventListener('DOMContentLoaded', init);

async function init() {
  for (const id of ['ask-form', 'question', 'ask-button', 'question-count', 'loading', 'error', 'result',
    'profile', 'turnstile', 'turnstile-note']) els[id] = $(id);
  els.examples = [0, 1, 2].map((i) => $(`example-${i}`));
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

  applyConfig(FALLBACK_CONFIG);
  const config = await loadConfig();
  if (config) applyConfig(config);

  // A shareable link: /?q=question asks straight away.
  const q = new URLSearchParams(window.location.search).get('q');
  if (q) {
    els.question.value = q.slice(0, els.question.maxLength);
    updateCount();
    ask(els.question.value);
  }
}

async function loadConfig() {
  try {
    const res = await fetch('/config', { headers: { Accept: 'application/json' } });
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
    els.profile.textContent = `Profile: ${cfg.profile}`;
    els.profile.hidden = false;
  }
  const examples = Array.isArray(cfg.examples) && cfg.examples.length >= 3 ? cfg.examples : FALLBACK_CONFIG.examples;
  els.examples.forEach((btn, i) => setExample(btn, String(examples[i]), i === 2));
  if (cfg.turnstileSiteKey && state.widgetId === null && !state.turnstileLoading) loadTurnstile(cfg.turnstileSiteKey);
}

/** The third example is the "not covered" one: label it as such and ask only the question part. */
function setExample(btn, text, uncovered) {
  let question = text.trim();
  if (uncovered) {
    const m = question.match(/^ask something the docs don['’]t cover\s*[:\-–—]\s*/i);
    if (m) question = question.slice(m[0].length);
    question = question.charAt(0).toUpperCase() + question.slice(1);
    btn.replaceChildren(h('span', { class: 'example__kicker', text: UNCOVERED }), h('span', { class: 'visually-hidden', text: ': ' }),
      h('span', { class: 'example__q', text: question }));
  } else {
    btn.replaceChildren(h('span', { class: 'example__q', text: question }));
  }
  btn.dataset.question = question;
  if (!btn.dataset.bound) {
    btn.dataset.bound = '1';
    btn.addEventListener('click', () => {
      if (state.busy) return;
      els.question.value = btn.dataset.question;
      updateCount();
      ask(btn.dataset.question);
    });
  }
}

function updateCount() {
  els['question-count'].textContent = `${els.question.value.length} / ${els.question.maxLength}`;
}

/* ---------- asking ---------- */

async function ask(raw) {
  if (state.busy) return;
  const question = String(raw || '').trim();
  hideError();
  if (!question) {
    showError('Type a question first.', '');
    els.question.focus();
    return;
  }
  setBusy(true);
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), ASK_TIMEOUT_MS);
  try {
    const body = { question };
    const token = await turnstileToken();
    if (token) body.turnstileToken = token;
    const res = await fetch('/ask', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    const data = await res.json().catch(() => null);
    const retryAfter = parseRetryAfter(res.headers.get('Retry-After'));
    if (data && typeof data.status === 'string' && data.stages) {
      renderResponse(els.summary, els.details, data, { retryAfter, loadPassage });
      if (res.status >= 500) showError(errorText(res, data));
    } else {
      clearResult();
      showError(errorText(res, data, retryAfter), res.status >= 400 && res.status < 500 ? '' : undefined);
    }
  } catch (err) {
    clearResult();
    showError(err.name === 'AbortError'
      ? 'The service took too long to answer. Please try again.'
      : "Couldn't reach the service. Check your connection and try again.");
  } finally {
    clearTimeout(timer);
    setBusy(false);
    resetTurnstile();
  }
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

const capitalise = (s) => s.charAt(0).toUpperCase() + s.slice(1);

function parseRetryAfter(value) {
  if (!value) return null;
  const n = Number(value);
  if (Number.isFinite(n)) return Math.max(0, Math.ceil(n));
  const when = Date.parse(value);
  return Number.isNaN(when) ? null : Math.max(0, Math.ceil((when - Date.now()) / 1000));
}

async function loadPassage(id) {
  if (!state.passages.has(id)) {
    const p = fetch(`/passages/${encodeURIComponent(id)}`, { headers: { Accept: 'application/json' } }).then(async (res) => {
      const data = await res.json().catch(() => null);
      if (!res.ok || !data || typeof data.text !== 'string') {
        throw new Error((data && data.error && data.error.message) || `HTTP ${res.status}`);
      }
      return data;
    });
    p.catch(() => state.passages.delete(id));
    state.passages.set(id, p);
  }
  return state.passages.get(id);
}

function setBusy(busy) {
  state.busy = busy;
  els['ask-button'].disabled = busy;
  els['ask-button'].textContent = busy ? 'Checking…' : 'Ask';
  els.examples.forEach((b) => { b.disabled = busy; });
  els.result.setAttribute('aria-busy', String(busy));
  els['ask-form'].setAttribute('aria-busy', String(busy));
  els.loading.hidden = !busy;
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
