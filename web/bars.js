// The bars and gauges every view draws, and where a passage is (its file and pages).
import { h, isNum, fmtScore, clamp01 } from './dom.js';

/** Where a passage is: its file, and for a paged source (PDF) its page or pages ("handbook.pdf, pp. 12–13"). */
export function sourceLabel(x) {
  const pages = Array.isArray(x.pages) ? x.pages : [];
  if (!pages.length) return x.source;
  const [first, last] = [pages[0], pages[pages.length - 1]];
  return `${x.source}, ${first === last ? `p. ${first}` : `pp. ${first}–${last}`}`;
}

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
