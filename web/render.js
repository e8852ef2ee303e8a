// Turns one AskResponse into DOM: verdict, answer or the reason for refusing, evidence, pipeline.
import { h, isNum, fmtScore, fmtMs, fmtUsd, fmtInt, fmtWait, clamp01, capitalise } from './dom.js';

const VERDICTS = {
  answered: { title: 'Answered', sub: 'Every claim in the answer was checked against the documents.', icon: '✓' },
  refused: { title: 'Refused', sub: 'No answer was given.', icon: '!' },
  blocked: { title: 'Blocked', sub: 'The question was stopped before the documents were searched.', icon: '×' },
};

// Each stage's wire key, test id suffix and label. The order is the server's: `resp.stages` lists the stages in
// the order the pipeline runs them (wire.py `Stages`); this list only names them, and orders a response
// that carries no stages.
const STAGES = [
  ['botCheck', 'bot-check', 'Bot check'],
  ['cache', 'cache', 'Cache'],
  ['rateLimit', 'rate-limit', 'Rate limit'],
  ['admission', 'admission', 'Admission'],
  ['spend', 'spend', 'Spend cap'],
  ['screening', 'screening', 'Screening'],
  ['retrieval', 'retrieval', 'Retrieval'],
  ['quarantine', 'quarantine', 'Quarantine'],
  ['generation', 'generation', 'Generation'],
  ['decomposition', 'decomposition', 'Claim split'],
  ['entailment', 'entailment', 'Entailment'],
  ['lexicalCheck', 'lexical-check', 'Lexical check'],
  ['groundedness', 'groundedness', 'Gate'],
];
const STAGE_NAMES = new Map(STAGES.map(([key, id, label]) => [key, [id, label]]));

/** The stages of a response in the pipeline's order, as [key, test id, label]; a stage this page does not
 * name yet still shows, named after its key. */
function stagesOf(resp) {
  return namedStages(Object.keys(resp.stages || {}));
}

/** Stage keys in the server's order (a response's `stages`, a stream's `start` event) as [key, test id, label]. */
function namedStages(keys) {
  return (keys.length ? keys : STAGES.map(([key]) => key)).map((key) => {
    if (STAGE_NAMES.has(key)) return [key, ...STAGE_NAMES.get(key)];
    const words = key.replace(/[A-Z]/g, (c) => ` ${c.toLowerCase()}`); // lexicalCheck -> "lexical check"
    return [key, words.replace(/ /g, '-'), capitalise(words)];
  });
}

/** Where a passage is: its file, and for a paged source (PDF) its page or pages ("handbook.pdf, pp. 12–13"). */
export function sourceLabel(x) {
  const pages = Array.isArray(x.pages) ? x.pages : [];
  if (!pages.length) return x.source;
  const [first, last] = [pages[0], pages[pages.length - 1]];
  return `${x.source}, ${first === last ? `p. ${first}` : `pp. ${first}–${last}`}`;
}

const STATUS_WORDS = { ok: 'ok', skipped: 'skipped', blocked: 'blocked', failed: 'failed', hit: 'hit', miss: 'miss' };

/* ---------- bars ---------- */

/** A horizontal 0–1 bar; `mark` draws a threshold line, `tone` colours the fill. */
export function scoreBar(value, { mark = null, tone = 'neutral', label = '', scale = 1 } = {}) {
  const fill = h('span', { class: 'bar__fill' });
  fill.style.width = `${(clamp01(value / (scale || 1)) * 100).toFixed(1)}%`;
  const parts = [fill];
  if (isNum(mark)) {
    const m = h('span', { class: 'bar__mark' });
    m.style.left = `${(clamp01(mark) * 100).toFixed(1)}%`;
    parts.push(m);
  }
  const aria = `${label ? `${label}: ` : ''}${fmtScore(value)}${isNum(mark) ? `, threshold ${fmtScore(mark)}` : ''}`;
  return h('span', { class: `bar bar--${tone}`, role: 'img', 'aria-label': aria }, parts);
}

/** The gate's rules drawn as gauges: mean support vs threshold, weakest claim vs its floor, and the most
 * relevant claim vs the relevance threshold. */
export function gateGauge(g) {
  if (!g || (!isNum(g.score) && !isNum(g.minClaim))) return null;
  const row = (name, value, threshold, what) => {
    const pass = isNum(value) && value >= threshold;
    return h('div', { class: `gauge gauge--${pass ? 'pass' : 'fail'}` },
      h('span', { class: 'gauge__name' }, name, h('span', { class: 'gauge__what', text: what })),
      scoreBar(value, { mark: threshold, tone: pass ? 'good' : 'bad', label: name }),
      h('span', { class: 'gauge__value' },
        h('strong', { text: fmtScore(value) }), ` ${pass ? '≥' : '<'} ${fmtScore(threshold)} `,
        h('span', { class: `pill pill--${pass ? 'pass' : 'fail'}`, text: isNum(value) ? (pass ? 'pass' : 'fail') : 'not measured' })));
  };
  return h('div', { class: 'gate', 'data-decision': g.decision || '' },
    row('Mean support', g.score, g.threshold, 'average over all claims'),
    row('Weakest claim', g.minClaim, g.minClaimThreshold, 'lowest single claim'),
    isNum(g.relevance) ? row('Relevance', g.relevance, g.relevanceThreshold,
      g.relevanceRule === 'every' ? 'claims answer the question, on average' : 'best claim answers the question') : null);
}

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
      // The reason's headline comes from the server (api/provenance/reasons.py), worded there once.
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
  return h('li', { class: 'citation', 'data-testid': 'citation', 'data-passage-id': c.passageId }, button, pane);
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
 * The server's message (api/provenance/reasons.py, with this request's particulars): the explanation, then what it
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

/* ---------- evidence: claims and passages ---------- */

function evidenceBlock(resp, ctx) {
  const g = resp.stages?.groundedness || {};
  const gen = resp.stages?.generation || {};
  const claims = g.claims || [];
  const cited = new Set((resp.citations || []).map((c) => c.passageId));
  const used = new Set(gen.usedPassageIds || []);
  // A passage supports a claim only when the claim cleared the per-claim floor; below it, the passage is
  // merely the one the verifier compared the claim with.
  const supports = new Map(); // passage id -> [claim numbers]
  claims.forEach((c, i) => {
    if (!(c.support >= g.minClaimThreshold)) return;
    (c.supportingPassageIds || []).forEach((id) => supports.set(id, [...(supports.get(id) || []), i + 1]));
  });

  const passageList = h('ol', { class: 'passages' }, ctx.passages.map((p, i) => passageCard(p, i, ctx, {
    supports: supports.get(p.id) || [], cited: cited.has(p.id), used: used.has(p.id), refused: resp.status === 'refused', g,
  })));
  const scale = passageScale(ctx.passages);

  const claimList = claims.length ? h('ol', { class: 'claims' }, claims.map((c, i) => claimRow(c, i, g, ctx, passageList))) : null;

  return h('section', { class: 'card evidence', 'aria-labelledby': 'evidence-title' },
    h('h3', { id: 'evidence-title', class: 'card__title', text: 'Evidence' }),
    claims.length ? [
      h('h4', { class: 'subhead', text: `Claims checked (${claims.length})` }),
      h('p', { class: 'legend' },
        h('span', { class: 'legend__mark', 'aria-hidden': 'true' }),
        ` The line marks the per-claim floor (${fmtScore(g.minClaimThreshold)}). `,
        h('span', { class: 'swatch swatch--good', 'aria-hidden': 'true' }), ` at or above the ${fmtScore(g.threshold)} target, `,
        h('span', { class: 'swatch swatch--warn', 'aria-hidden': 'true' }), ' between, ',
        h('span', { class: 'swatch swatch--bad', 'aria-hidden': 'true' }), ' below the floor. ',
        // Which sentence shows is CSS's (hover: none) query: a phone has no hover, only taps.
        h('span', { class: 'only-hover', 'data-testid': 'legend-hover', text: 'Hover over or focus a claim to see its passages.' }),
        h('span', { class: 'only-touch', 'data-testid': 'legend-touch', text: 'Tap a claim to see its passages.' })),
      claimList,
    ] : (gen.status === 'ok' || gen.status === 'hit')
      ? h('p', { class: 'muted', text: gen.empty ? 'No answer was written, so there were no claims to check.' : 'No claims were checked.' }) : null,
    ctx.passages.length ? [
      h('h4', { class: 'subhead' }, `Retrieved passages (${ctx.passages.length})`,
        scale.relative ? h('span', { class: 'subhead__note', text: ' · bars relative to the top score' }) : null,
        resp.stages?.retrieval?.mode === 'hybrid'
          ? h('span', { class: 'subhead__note', text: ' · ranked by meaning and keywords together; the score is similarity in meaning' }) : null),
      passageList,
    ] : null);
}

function passageScale(passages) {
  const max = Math.max(0, ...passages.map((p) => (isNum(p.score) ? p.score : 0)));
  const relative = max > 1 || (max > 0 && max < 0.2);
  return { relative, scale: relative ? max : 1 };
}

function passageCard(p, i, ctx, { supports, cited, used, refused, g }) {
  const { scale } = passageScale(ctx.passages);
  const closest = refused && p.closest ? closestWords(p.closest, g) : null;
  const marks = [];
  if (supports.length) marks.push(h('span', { class: 'mark mark--support', text: `Supports claim${supports.length > 1 ? 's' : ''} ${supports.join(', ')}` }));
  if (cited) marks.push(h('span', { class: 'mark mark--cited', text: 'Cited' }));
  else if (used) marks.push(h('span', { class: 'mark', text: 'Used in draft' }));
  return h('li', {
    class: `passage${supports.length ? ' passage--supporting' : ''}`, 'data-testid': 'passage', 'data-passage-id': p.id,
  }, h('details', {},
    h('summary', { class: 'passage__summary' },
      h('span', { class: 'ptag', text: `P${i + 1}` }),
      h('span', { class: 'passage__title' }, h('span', { class: 'crumb' }, sourceLabel(p),
        h('span', { class: 'crumb__sep', 'aria-hidden': 'true', text: ' › ' }), h('span', { class: 'visually-hidden', text: ', section ' }), p.heading)),
      marks.length ? h('span', { class: 'passage__marks' }, marks) : null,
      h('span', { class: 'passage__score' }, scoreBar(p.score, { tone: 'info', scale, label: 'Retrieval score' }),
        h('span', { class: 'num', text: fmtScore(p.score) }))),
    h('div', { class: 'passage__body' },
      h('p', { class: 'passage-text' }, highlighted(p.text, ctx.spans(p.id))),
      h('p', { class: 'passage-meta' }, h('code', { text: p.id })))),
  closest ? closestLine(p, closest) : null);
}

/* ---------- highlights: where in a passage the server found what mattered ---------- */

/** What to mark in passage `id`: each claim's evidence (the support check's window, from the server), and on
 * a refusal the passage's sentence closest to the question. */
function highlightsOf(id, resp, g) {
  const spans = [];
  (g.claims || []).forEach((c, i) => {
    for (const e of c.evidence || []) {
      if (e.passageId !== id) continue;
      const compared = !(c.support >= g.minClaimThreshold);
      spans.push({
        start: e.start, end: e.end, cls: compared ? 'hl--compared' : 'hl--support', testid: 'evidence-highlight',
        title: `${compared ? 'Compared with' : 'Supports'} claim ${i + 1}`,
      });
    }
  });
  const p = (resp.stages?.retrieval?.passages || []).find((x) => x.id === id);
  if (resp.status === 'refused' && p && p.closest) {
    spans.push({ start: p.closest.start, end: p.closest.end, cls: 'hl--closest', testid: 'closest-highlight', title: capitalise(closestWords(p.closest, g)) });
  }
  return spans;
}

/** The text with `spans` marked. Offsets are the server's, in Unicode code points ([start, end)), so the text
 * is split into code points first: JavaScript's string indices count UTF-16 units. Where spans overlap, the
 * earlier one is marked in full and the later from where it ends. */
export function highlighted(text, spans) {
  const chars = Array.from(String(text || ''));
  // One mark for spans over the same words (a refused claim quoted from the sentence closest to the question):
  // both classes and both titles; the later span's test id (the closest sentence's is pushed last).
  const same = new Map();
  for (const s of spans || []) {
    if (!(isNum(s.start) && isNum(s.end) && s.end > s.start && s.start < chars.length)) continue;
    const key = `${s.start}:${s.end}`;
    const had = same.get(key);
    same.set(key, had ? { ...s, cls: `${had.cls} ${s.cls}`, title: `${had.title}; ${s.title}` } : s);
  }
  const ok = [...same.values()].sort((a, b) => a.start - b.start || b.end - a.end);
  const out = [];
  let at = 0;
  for (const s of ok) {
    const start = Math.max(s.start, at);
    const end = Math.min(s.end, chars.length);
    if (end <= start) continue;
    if (start > at) out.push(chars.slice(at, start).join(''));
    out.push(h('mark', { class: `hl ${s.cls}`, title: s.title, 'data-testid': s.testid }, chars.slice(start, end).join('')));
    at = end;
  }
  if (at < chars.length) out.push(chars.slice(at).join(''));
  return out;
}

/** A refusal's pointer, never a verdict: the sentence "may answer" only when the verifier judged it at least
 * uncertain, else it is just the closest. */
function closestWords(c, g) {
  const uncertain = isNum(g.relevanceUncertain) ? g.relevanceUncertain : 0.4;
  return c.by === 'relevance' && isNum(c.score) && c.score >= uncertain
    ? 'may answer your question — check it' : 'closest to your question';
}

function closestLine(p, words) {
  const sentence = Array.from(p.text).slice(p.closest.start, p.closest.end).join('');
  return h('p', { class: 'passage__closest', 'data-testid': 'closest', 'data-by': p.closest.by },
    h('span', { class: 'passage__closest-label', text: `${capitalise(words)}:` }), ' ',
    h('mark', { class: 'hl hl--closest', text: sentence }),
    h('span', { class: 'passage__closest-score', text: ` (${p.closest.by === 'relevance' ? 'relevance' : 'similarity'} ${fmtScore(p.closest.score)})` }));
}

/** A claim's two judgments, each in words: is it in the documents, and does it answer the question. */
function supportVerdict(c, g) {
  if (c.quoted) return { tone: 'good', words: 'quoted word for word from the documents' };
  if (c.support >= g.threshold) return { tone: 'good', words: 'the documents say this' };
  if (c.support >= g.minClaimThreshold) return { tone: 'warn', words: 'the documents may not say this' };
  return { tone: 'bad', words: "the documents don't say this" };
}

function relevanceVerdict(c, g) {
  const threshold = isNum(g.relevanceThreshold) ? g.relevanceThreshold : 0.7;
  const uncertain = isNum(g.relevanceUncertain) ? g.relevanceUncertain : 0.4;
  if (c.relevance >= threshold) return { tone: 'good', words: 'answers your question' };
  if (c.relevance >= uncertain) return { tone: 'warn', words: 'may answer your question — check it' };
  return { tone: 'info', words: "doesn't answer your question" };
}

function claimRow(c, i, g, ctx, passageList) {
  const sv = supportVerdict(c, g);
  const rv = relevanceVerdict(c, g);
  // A claim the documents state is never painted red for not answering: it is context, true to the documents.
  const tone = sv.tone === 'good' ? (rv.tone === 'good' ? 'good' : 'info') : sv.tone;
  const ids = c.supportingPassageIds || [];
  const row = h('li', {
    class: `claim claim--${tone}`, 'data-testid': 'claim', tabindex: '0', 'data-supporting': ids.join(' '),
  },
  h('span', { class: 'claim__num', 'aria-hidden': 'true', text: i + 1 }),
  h('div', { class: 'claim__main' },
    h('p', { class: 'claim__text' }, h('span', { class: 'visually-hidden', text: `Claim ${i + 1}: ` }), c.text),
    h('div', { class: 'claim__score', 'data-testid': 'claim-support' },
      scoreBar(c.support, { mark: g.minClaimThreshold, tone: sv.tone, label: `Claim ${i + 1} support` }),
      h('span', { class: 'num' }, h('strong', { text: fmtScore(c.support) }), ` ${sv.words}`)),
    h('div', { class: 'claim__score', 'data-testid': 'claim-relevance' },
      scoreBar(c.relevance, { mark: g.relevanceThreshold, tone: rv.tone, label: `Claim ${i + 1} answers the question` }),
      h('span', { class: 'num' }, h('strong', { text: fmtScore(c.relevance) }), ` ${rv.words}`)),
    h('p', { class: 'claim__figures', 'data-testid': 'claim-figures' }, claimFigures(c).join(' · '),
      c.veto ? h('span', { class: 'capped', 'data-testid': 'claim-veto', 'data-veto': c.veto, text: ` · ${vetoWords(c.veto)}` }) : null,
      c.cappedBy ? h('span', { class: 'capped', text: ` · ${cappedWords(c.cappedBy)}` }) : null,
      c.relevanceCappedBy ? h('span', { class: 'capped', text: ` · ${cappedWords(c.relevanceCappedBy)}` }) : null),
    c.judge ? judgeLine(c.judge) : null,
    h('p', { class: 'claim__support' }, ids.length
      ? [c.quoted ? 'Quoted from ' : sv.tone === 'bad' ? 'Compared with ' : 'Supported by ', ids.map((id, k) => [k ? ', ' : '', h('span', { class: 'ptag ptag--inline', title: id, text: ctx.labels.get(id) || id })])]
      : h('span', { class: 'muted', text: 'No supporting passage found' }))));

  const setLinked = (on) => {
    row.classList.toggle('is-active', on);
    for (const card of passageList.children) {
      card.classList.toggle('is-linked', on && ids.includes(card.dataset.passageId));
    }
  };
  row.addEventListener('mouseenter', () => setLinked(true));
  row.addEventListener('mouseleave', () => setLinked(row === document.activeElement));
  row.addEventListener('focus', () => setLinked(true));
  row.addEventListener('blur', () => setLinked(false));
  return row;
}

/** Who read the claim: the judge model by name, whether it is independent of the model that wrote the answer,
 * and what it said, before the rules' vetoes. */
function judgeLine(j) {
  const who = `${j.model}${j.independent ? ', independent of the writer' : ', the same model as the writer, in a separate call'}`;
  const parts = [];
  if (isNum(j.rawSupport)) parts.push(`says the passage states it: ${fmtScore(j.rawSupport)}${j.calibrated ? ` (calibrated ${fmtScore(j.support)})` : ' (uncalibrated)'}`);
  if (isNum(j.relevance)) parts.push(`says it answers the question: ${fmtScore(j.relevance)}`);
  if (j.method === 'json') parts.push('a yes/no verdict (the server gives no probabilities)');
  if (j.detail) parts.push(j.detail);
  return h('p', { class: 'claim__judge', 'data-testid': 'claim-judge' },
    h('span', { class: 'claim__judge-name', text: `Judged by ${who}` }), parts.length ? `: ${parts.join(' · ')}` : '');
}

const VETOES = {
  fact_not_stated: 'refused by a rule: it states a number, date or name its passage does not',
  negation_flipped: 'refused by a rule: it reverses what its passage allows or forbids',
  not_self_contained: 'held down by a rule: it points to something outside itself ("it", "the latter")',
};

function vetoWords(veto) {
  return VETOES[veto] || `refused by a rule (${String(veto).replace(/_/g, ' ')})`;
}

/** Who judged what, in words rather than "local 0.97 · model 0.95". Support is always judged on this server,
 * never by the model alone; whether a claim answers the question is the model's verdict when there is one. */
function claimFigures(c) {
  const out = [];
  if (!c.quoted && isNum(c.lexicalOverlap)) {
    const share = clamp01(c.lexicalOverlap);
    out.push(share >= 0.995 ? 'all its key words are in the passages'
      : share < 0.005 ? 'none of its key words are in the passages'
        : `${Math.round(share * 100)}% of its key words are in the passages`);
  }
  if (!c.quoted && isNum(c.localSupport)) out.push(`support by the ${c.judge ? 'rules' : 'checker'} on this server: ${fmtScore(c.localSupport)}`);
  if (isNum(c.modelSupport)) out.push(`support by the language model: ${fmtScore(c.modelSupport)}`);
  if (isNum(c.modelRelevance)) out.push(`answers the question, by the language model: ${fmtScore(c.modelRelevance)}`);
  else if (isNum(c.localRelevance)) out.push(`answers the question, by the checker on this server: ${fmtScore(c.localRelevance)}`);
  return out;
}

const CAPPED = {
  low_lexical_overlap: 'support held down: few of its words are in any passage',
  number_or_date_not_in_support: 'support held down: it states a number or date its passage does not',
  question_date_not_in_support: 'relevance held down: the question names a year, month or number its passage does not',
  wrong_answer_type: 'relevance held down: it is not the kind of answer the question asks for',
  premise_not_in_passages: 'relevance held down: the question takes for granted something no passage states',
};

function cappedWords(why) {
  return CAPPED[why] || `score held down (${String(why).replace(/_/g, ' ')})`;
}

/* ---------- pipeline panel ---------- */

// On a cached answer these ran now; every later stage is the stored record of the original run.
const LIVE_ON_CACHE_HIT = new Set(['botCheck', 'rateLimit', 'cache', 'admission']);

function pipelinePanel(resp) {
  const stages = resp.stages || {};
  const order = stagesOf(resp);
  const ran = order.filter(([key]) => stages[key] && stages[key].status !== 'skipped').length;
  const cached = Boolean(resp.cached);
  return h('section', { class: 'card pipeline', 'data-testid': 'pipeline-panel', 'aria-labelledby': 'pipeline-title' },
    h('h3', { id: 'pipeline-title', class: 'card__title', text: 'How it was decided' }),
    h('p', { class: 'muted pipeline__sum' },
      cached ? `Answered from the cache in ${fmtMs(resp.totalMs)}` : `${ran} of ${order.length} stages ran · total ${fmtMs(resp.totalMs)}`,
      resp.corpusVersion ? ` · corpus ${resp.corpus ? `${resp.corpus} ` : ''}${resp.corpusVersion}` : '',
      resp.requestId ? [' · request ', h('code', { text: resp.requestId })] : ''),
    cached ? cachedNote(stages.cache) : null,
    h('ol', { class: 'stages' }, order.map(([key, id, label], i) => stageRow(key, id, label, i, stages[key] || { status: 'skipped' },
      cached && !LIVE_ON_CACHE_HIT.has(key)))));
}

/**
 * While the stream runs: the stages told so far, in the pipeline's order (`live.order`, from the stream's
 * `start` event), and a running indicator on the first stage not told yet.
 */
export function renderProgress(details, live) {
  const order = namedStages(live.order || []);
  const running = order.find(([key]) => !live.records.has(key));
  const rows = order.map(([key, id, label], i) => {
    if (live.records.has(key)) return stageRow(key, id, label, i, live.records.get(key) || { status: 'skipped' });
    return running && key === running[0] ? runningRow(id, label, i) : null;
  });
  details.replaceChildren(h('section', { class: 'card pipeline', 'data-testid': 'pipeline-progress', 'aria-labelledby': 'progress-title', 'aria-busy': 'true' },
    h('h3', { id: 'progress-title', class: 'card__title', text: 'How it is being decided' }),
    h('p', { class: 'muted pipeline__sum', text: `${live.records.size} of ${order.length} stages done; the answer comes when the gate has decided.` }),
    h('ol', { class: 'stages' }, rows)));
}

function runningRow(id, label, i) {
  return h('li', { class: 'stage stage--running', 'data-testid': `stage-${id}`, 'data-stage-status': 'running' },
    h('span', { class: 'stage__step', 'aria-hidden': 'true', text: i + 1 }),
    h('span', { class: 'stage__name', text: label }),
    h('span', { class: 'badge badge--running', 'data-testid': 'stage-badge' }, h('span', { class: 'spinner spinner--small', 'aria-hidden': 'true' }), ' running'),
    h('span', { class: 'stage__ms', text: '…' }));
}

function cachedNote(cache) {
  const when = cache?.cachedAt ? new Date(cache.cachedAt) : null;
  const at = when && !Number.isNaN(when.getTime()) ? ` of ${when.toLocaleString()}` : '';
  return h('p', { class: 'pipeline__cached', 'data-testid': 'cached-note' },
    `This answer was stored: the stages from Spend cap on, and their timings (in italics), are the record of the original run${at}. Nothing was searched or checked again, and no model was called now.`);
}

function stageRow(key, id, label, i, s, original = false) {
  const status = STATUS_WORDS[s.status] ? s.status : 'ok';
  const figs = status === 'skipped' ? [] : stageFigures(key, s);
  const extra = key === 'groundedness' && status !== 'skipped' ? gateGauge(s) : null;
  const badge = stageBadge(key, status, s);
  const ms = status === 'skipped' && !s.ms ? '—' : fmtMs(s.ms);
  // The free profile's detail ("makes no paid calls") would repeat its one figure.
  const detail = key === 'spend' && isFree(s) ? null : s.detail;
  return h('li', {
    class: `stage stage--${status}${original ? ' stage--original' : ''}`, 'data-testid': `stage-${id}`, 'data-stage-status': status,
    'data-decision': badge.decision, 'data-original-run': original ? 'true' : null,
  },
    h('span', { class: 'stage__step', 'aria-hidden': 'true', text: i + 1 }),
    h('span', { class: 'stage__name', text: label }),
    h('span', { class: `badge badge--${badge.tone}`, 'data-testid': 'stage-badge', text: badge.text }),
    h('span', { class: 'stage__ms' }, ms, original && ms !== '—' ? h('span', { class: 'visually-hidden', text: ' in the original run' }) : null),
    h('div', { class: 'stage__info' },
      figs.length ? h('ul', { class: 'figs' }, figs.map(([k, v]) => h('li', {}, h('span', { class: 'figs__k', text: k }), ' ', h('span', { class: 'figs__v', text: v })))) : null,
      detail ? h('p', { class: 'stage__detail', text: status === 'skipped' && !/^skipped\b/i.test(detail) ? `Skipped: ${detail}` : capitalise(detail) }) : null,
      status === 'skipped' && !detail ? h('p', { class: 'stage__detail', text: 'Skipped' }) : null,
      extra));
}

/** The gate ran ("ok") whether it passed or failed; its badge shows the decision, so OK never sits beside a fail. */
function stageBadge(key, status, s) {
  if (key === 'groundedness' && status === 'ok' && (s.decision === 'pass' || s.decision === 'fail')) {
    return { tone: s.decision, text: s.decision, decision: s.decision };
  }
  return { tone: status, text: STATUS_WORDS[status], decision: null };
}

/** The free profile books $0 against the budget; "$0.00 of $5.00" reads as if money could have been spent. */
function isFree(s) {
  return isNum(s.estimateUsd) && s.estimateUsd === 0 && !(s.chargedUsd > 0);
}

/** The key figures for each stage, as [label, value] pairs; missing values are left out. */
function stageFigures(key, s) {
  const f = [];
  const add = (k, v) => { if (v !== null && v !== undefined && v !== '' && v !== '—') f.push([k, String(v)]); };
  switch (key) {
    case 'botCheck': add('method', s.method); break;
    case 'rateLimit':
      if (isNum(s.remaining) && isNum(s.limit)) add('remaining', `${s.remaining} of ${s.limit}`);
      if (isNum(s.retryAfterS)) add('retry after', fmtWait(s.retryAfterS));
      break;
    case 'cache': if (s.cachedAt) add('cached at', new Date(s.cachedAt).toLocaleString()); break;
    case 'admission':
      if (isNum(s.running)) add('pipelines running', s.running);
      if (isNum(s.waiting)) add('waiting', s.waiting);
      break;
    case 'spend':
      if (isFree(s)) {
        add('paid calls', 'none were made (this profile runs on this server)');
        break;
      }
      if (isNum(s.spentUsd) || isNum(s.budgetUsd)) add('spent', `${fmtUsd(s.spentUsd)} of ${fmtUsd(s.budgetUsd)}`);
      if (isNum(s.estimateUsd)) add('estimate', fmtUsd(s.estimateUsd));
      if (isNum(s.chargedUsd)) add('charged', fmtUsd(s.chargedUsd));
      break;
    case 'screening':
      add('decision', s.decision);
      add('reason', s.reason);
      add('deny-list', s.denyListMatch);
      if (s.classifier) add('classifier', `${s.classifier}${s.label ? ` → ${s.label}` : ''}${isNum(s.score) ? ` (${fmtScore(s.score)})` : ''}`);
      break;
    case 'retrieval': {
      const ps = s.passages || [];
      add('passages', `${ps.length}${s.k ? ` of k=${s.k}` : ''}`);
      if (ps.length) add('top score', fmtScore(Math.max(...ps.map((p) => p.score))));
      add('mode', s.mode);
      add('embedder', s.embedModel);
      break;
    }
    case 'quarantine': {
      // Sentences in the passages that spoke to the model, held back from every later stage.
      const held = s.heldBack || [];
      const sentences = held.reduce((n, x) => n + (isNum(x.sentences) ? x.sentences : 0), 0);
      add('held back', held.length
        ? `${sentences} sentence${sentences === 1 ? '' : 's'} from ${held.length} passage${held.length === 1 ? '' : 's'}`
        : 'nothing: no passage spoke to the model');
      const dropped = held.filter((x) => x.dropped).length;
      if (dropped) add('passages dropped', dropped);
      break;
    }
    case 'generation':
      add('model', s.model);
      if (s.inputTokens || s.outputTokens) add('tokens', `${fmtInt(s.inputTokens)} in · ${fmtInt(s.outputTokens)} out`);
      if (s.empty) add('output', 'empty (no answer)');
      if ((s.usedPassageIds || []).length) add('passages used', s.usedPassageIds.length);
      break;
    case 'decomposition':
      add('claims', s.claimCount);
      if ((s.dropped || []).length) add('dropped', s.dropped.length);
      if ((s.notInAnswer || []).length) add('not in the answer', s.notInAnswer.length);
      if (s.added) add('answer sentences added', s.added);
      add('model', s.model);
      break;
    case 'entailment': if ((s.verifiers || []).length) add('verifiers', s.verifiers.join(', ')); break;
    case 'lexicalCheck': add('claims capped', s.capped); break;
    case 'groundedness': break; // its badge is the decision; the gauges below show why
    default: break;
  }
  return f;
}
