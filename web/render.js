// Turns one AskResponse into DOM: verdict, answer or the reason for refusing; the evidence (evidence.js) and
// the pipeline (pipeline.js) views below them.
import { h, isNum, fmtScore, fmtMs, fmtWait, capitalise } from './dom.js';
import { gateGauge, sourceLabel } from './bars.js';
import { evidenceBlock, highlighted, highlightsOf } from './evidence.js';
import { pipelinePanel } from './pipeline.js';

const VERDICTS = {
  answered: { title: 'Answered', sub: 'Every claim in the answer was checked against the documents.', icon: '✓' },
  refused: { title: 'Refused', sub: 'No answer was given.', icon: '!' },
  blocked: { title: 'Blocked', sub: 'The question was stopped before the documents were searched.', icon: '×' },
};

/* ---------- the whole response ---------- */

/**
 * Render `resp` into two containers: `summary` (verdict, answer or why; live region)
 * and `details` (evidence and pipeline). `opts.retryAfter` (seconds) from the Retry-After header;
 * `opts.loadPassage(id)` returns a Promise of a PassageOut.
 */
export function renderResponse(summary, details, resp, opts = {}) {
  const stages = resp.stages || {};
  const passages = stages.retrieval?.passages || [];
  const claims = stages.groundedness?.claims || [];
  const labels = new Map(passages.map((p, i) => [p.id, `P${i + 1}`]));
  const g = stages.groundedness || {};
  const ctx = { passages, labels, loadPassage: opts.loadPassage, spans: (id) => highlightsOf(id, resp, g) };

  summary.replaceChildren(verdictBanner(resp), questionEcho(resp.question),
    resp.status === 'answered' ? answerBlock(resp, ctx) : whyBlock(resp, opts.retryAfter));

  const evidence = passages.length || claims.length ? evidenceBlock(resp, ctx) : null;
  details.replaceChildren(...[evidence, pipelinePanel(resp)].filter(Boolean));
}

function verdictBanner(resp) {
  const v = VERDICTS[resp.status] || { title: resp.status, sub: '', icon: '?' };
  const meta = h('ul', { class: 'verdict__meta', 'aria-label': 'Request details' },
    h('li', { class: resp.cached ? 'chip chip--cached' : 'chip', 'data-testid': 'cached', text: resp.cached ? 'Cached result' : resp.status === 'blocked' ? 'Not cached' : 'Fresh result' }),
    h('li', { class: 'chip', 'data-testid': 'total-ms' }, 'Total ', fmtMs(resp.totalMs)),
    resp.profile ? h('li', { class: 'chip', text: `Profile: ${resp.profile}` }) : null);
  return h('div', { class: `verdict verdict--${resp.status}`, 'data-testid': 'verdict', 'data-status': resp.status },
    h('span', { class: 'verdict__icon', 'aria-hidden': 'true', text: v.icon }),
    h('div', { class: 'verdict__body' },
      h('h2', { class: 'verdict__title', id: 'verdict-title' }, v.title),
      // The reason's headline comes from the server (api/provenance/pipeline/reasons.py), worded there once.
      h('p', { class: 'verdict__sub', text: resp.headline ? `${resp.headline}.` : v.sub })),
    meta);
}

function questionEcho(q) {
  return q ? h('p', { class: 'question-echo' }, h('span', { class: 'question-echo__label', text: 'You asked' }), h('q', { text: q })) : null;
}

function answerBlock(resp, ctx) {
  const paras = String(resp.answer || '').split(/\n{2,}/).filter((s) => s.trim());
  const cites = resp.citations || [];
  return h('section', { class: 'card answer-card', 'aria-labelledby': 'answer-title' },
    h('h3', { id: 'answer-title', class: 'card__title', text: 'Answer' }),
    h('div', { class: 'answer', 'data-testid': 'answer' }, paras.map((p) => h('p', { text: p }))),
    h('h4', { class: 'subhead', text: cites.length === 1 ? 'Source' : `Sources (${cites.length})` }),
    cites.length
      ? h('ol', { class: 'citations', 'data-testid': 'citations' }, cites.map((c, i) => citationItem(c, i, ctx)))
      : h('p', { class: 'muted', 'data-testid': 'citations', text: 'No citations were returned.' }));
}

function citationItem(c, i, ctx) {
  const paneId = `citation-pane-${i}`;
  const pane = h('div', { class: 'citation__pane', id: paneId, hidden: true });
  const tag = ctx.labels.get(c.passageId);
  const button = h('button', { type: 'button', class: 'citation__button', 'aria-expanded': 'false', 'aria-controls': paneId },
    tag ? h('span', { class: 'ptag', text: tag }) : null,
    h('span', { class: 'crumb' }, h('span', { text: sourceLabel(c) }), h('span', { class: 'crumb__sep', 'aria-hidden': 'true', text: ' › ' }),
      h('span', { class: 'visually-hidden', text: ', section ' }), h('span', { text: c.heading })),
    h('span', { class: 'citation__toggle', 'aria-hidden': 'true' }));
  let loaded = false;
  button.addEventListener('click', () => {
    const open = button.getAttribute('aria-expanded') !== 'true';
    button.setAttribute('aria-expanded', String(open));
    pane.hidden = !open;
    if (open && !loaded) {
      loaded = true;
      fillCitationPane(pane, c, ctx);
    }
  });
  return h('li', { class: 'citation', 'data-testid': 'citation', 'data-passage-id': c.passageId }, button, pageLink(c.source), pane);
}

/**
 * A crawled page's citation names its address (the page's URL, at its section's #fragment): a link that opens it,
 * in a tab of its own so the answer stays. Only http(s): a source is the server's text, never a javascript: URL.
 */
function pageLink(source) {
  if (!/^https?:\/\//i.test(String(source || ''))) return null;
  return h('a', { class: 'citation__link', 'data-testid': 'citation-link', href: source, target: '_blank',
    rel: 'noopener noreferrer', text: source });
}

async function fillCitationPane(pane, c, ctx) {
  const known = ctx.passages.find((p) => p.id === c.passageId);
  pane.replaceChildren(h('p', { class: 'muted', text: 'Loading the passage…' }));
  try {
    if (!ctx.loadPassage) throw new Error('no loader');
    const p = await ctx.loadPassage(c.passageId);
    // The offsets are into the text the checks read: the stored passage, unless the quarantine held some back.
    const marks = known && known.text === p.text ? ctx.spans(c.passageId) : [];
    pane.replaceChildren(h('blockquote', { class: 'passage-text' }, highlighted(p.text, marks)),
      h('p', { class: 'passage-meta' }, h('code', { text: p.id }),
        isNum(p.tokenCount) ? ` · ${p.tokenCount} tokens` : '', p.embeddingModel ? ` · ${p.embeddingModel}` : ''));
  } catch (err) {
    pane.replaceChildren(known
      ? h('blockquote', { class: 'passage-text' }, highlighted(known.text, ctx.spans(c.passageId)))
      : h('p', { class: 'muted', text: `The passage could not be loaded (${err.message}).` }));
  }
}

function whyBlock(resp, retryAfter) {
  const g = resp.stages?.groundedness;
  const wait = retryAfter ?? resp.stages?.rateLimit?.retryAfterS;
  const showGate = resp.reason === 'not_grounded' || resp.reason === 'not_an_answer' || (g && g.decision === 'fail');
  return h('section', { class: 'card why', 'data-testid': 'refusal-reason', 'data-reason': resp.reason || '', 'aria-labelledby': 'why-title' },
    h('h3', { id: 'why-title', class: 'card__title', text: resp.status === 'blocked' ? 'Why it was blocked' : 'Why it was refused' }),
    ...explanation(resp.message, showGate),
    resp.status === 'refused' ? closestPassages(resp) : null,
    resp.reason === 'rate_limited' && isNum(wait)
      ? h('p', { class: 'retry', 'data-testid': 'retry-after', text: `Try again in ${fmtWait(wait)}.` }) : null,
    showGate ? h('div', { class: 'why__gate' }, h('h4', { class: 'subhead', text: 'The gate that decided' }), gateGauge(g)) : null,
    screeningNote(resp.stages?.screening));
}

/**
 * The server's message (api/provenance/pipeline/reasons.py, with this request's particulars): the explanation, then what it
 * adds in a closing parenthesis as Details, unless the gate's gauges are drawn, which show those figures.
 */
function explanation(message, showGate) {
  if (!message) return [];
  let body = String(message).trim();
  let aside = '';
  const paren = body.match(/^(.*?)\s*\(([^()]*)\)\s*$/s);
  if (paren) [, body, aside] = paren;
  return [
    body ? h('p', { class: 'why__plain', 'data-testid': 'refusal-message', text: body }) : null,
    aside && !showGate
      ? h('p', { class: 'why__message', 'data-testid': 'refusal-details' }, h('span', { class: 'why__label', text: 'Details' }), `${capitalise(aside)}.`)
      : null,
  ];
}

/** For a refusal: what the search did find, in words, so the reader sees why it was not enough. */
function closestPassages(resp) {
  const ps = resp.stages?.retrieval?.passages || [];
  if (!ps.length) return null;
  const topics = [...new Set(ps.map((p) => String(p.heading || p.source).split(' > ').pop()))];
  const list = topics.length > 1 ? `${topics.slice(0, -1).join(', ')} and ${topics[topics.length - 1]}` : topics[0];
  const best = Math.max(...ps.map((p) => (isNum(p.score) ? p.score : 0)));
  const tail = resp.reason === 'no_answer' ? ': none of them answers the question.' : '.';
  return h('p', { class: 'why__plain why__closest', 'data-testid': 'closest-passages' },
    `The closest passages the search found are about ${list} (best similarity ${fmtScore(best)} of 1; shown under Evidence below)${tail}`);
}

function screeningNote(s) {
  if (!s || s.decision !== 'block') return null;
  const bits = [];
  if (s.denyListMatch) bits.push(`matched the deny-list entry “${s.denyListMatch}”`);
  if (s.classifier) bits.push(`classifier ${s.classifier} said ${s.label || '?'}${isNum(s.score) ? ` (${fmtScore(s.score)})` : ''}`);
  return bits.length ? h('p', { class: 'why__plain', text: `Screening ${bits.join('; ')}.` }) : null;
}
