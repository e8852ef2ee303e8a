// The evidence view: the claims, each with its verdicts and vetoes, and the passages they rest on, highlighted
// where the server found what mattered.
import { h, isNum, fmtScore, clamp01, capitalise } from './dom.js';
import { scoreBar, sourceLabel } from './bars.js';

/* ---------- evidence: claims and passages ---------- */

export function evidenceBlock(resp, ctx) {
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
export function highlightsOf(id, resp, g) {
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

/** How the judge stands to the model that wrote the answer: another model of the same provider is never called
 * independent. */
const RELATIONS = {
  independent: ', independent of the writer',
  same_provider: ', same provider as the writer, different model',
  same_model: ', the same model as the writer, in a separate call',
};

/** Who read the claim: the judge model by name, how it stands to the model that wrote the answer, and what it
 * said, before the rules' vetoes. */
function judgeLine(j) {
  const relation = j.relation || (j.independent ? 'independent' : 'same_model');
  const who = `${j.model}${RELATIONS[relation] || RELATIONS.same_model}`;
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
