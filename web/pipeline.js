// The pipeline panel: each stage's record, as a finished response has it or as a stream tells it (renderProgress).
import { h, isNum, fmtScore, fmtMs, fmtUsd, fmtInt, fmtWait, capitalise } from './dom.js';
import { gateGauge } from './bars.js';

// Each stage's wire key, test id suffix and label. The order is the server's: `resp.stages` lists the stages in
// the order the pipeline runs them (wire.py `Stages`); this list only names them, and orders a response
// that carries no stages.
const STAGES = [
  ['botCheck', 'bot-check', 'Bot check'],
  ['cache', 'cache', 'Cache'],
  ['rateLimit', 'rate-limit', 'Rate limit'],
  ['admission', 'admission', 'Admission'],
  ['spend', 'spend', 'Spend cap'],
  ['condense', 'condense', 'Condense'],
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

const STATUS_WORDS = { ok: 'ok', skipped: 'skipped', blocked: 'blocked', failed: 'failed', hit: 'hit', miss: 'miss' };

/* ---------- progress while a stage waits on a model ---------- */

/**
 * The line the page shows while a stream's `progress` event says what is running: the stage, the tokens the
 * model has written so far and the seconds it has taken (`seconds`, counted on since the event).
 */
export function progressText(progress, seconds) {
  const s = `${Math.max(0, Math.round(seconds))} s`;
  const tokens = progress.tokens === 1 ? '1 token' : `${fmtInt(progress.tokens)} tokens`;
  switch (progress.stage) {
    case 'screening': return `Screening the question: ${s}`;
    case 'condense': return `Reading the follow-up with the conversation: ${s}`;
    case 'generation':
      return progress.tokens ? `The model is writing: ${tokens}, ${s}` : `The model is reading the passages: ${s}`;
    case 'decomposition':
      return progress.tokens ? `Checking the claims: the model has written ${tokens}, ${s}`
        : `Checking the claims: the model is reading the answer: ${s}`;
    case 'entailment': return `Checking the claims against the passages: ${s}`;
    default: return `Working: ${s}`;
  }
}

/* ---------- pipeline panel ---------- */

// On a cached answer these ran now; every later stage is the stored record of the original run.
const LIVE_ON_CACHE_HIT = new Set(['botCheck', 'rateLimit', 'cache', 'admission']);

export function pipelinePanel(resp) {
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
    case 'condense':
      add('searched for', s.standaloneQuestion);
      add('method', s.method === 'fused' ? 'the follow-up and its reading, ranks fused' : s.model || s.method);
      if (Array.isArray(s.carriedPassageIds) && s.carriedPassageIds.length) {
        add('carried forward', `${s.carriedPassageIds.length} passage${s.carriedPassageIds.length === 1 ? '' : 's'} the previous answer cited`);
      }
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
      if (s.cutOff) add('output', 'cut off at the token limit: its complete sentences were checked');
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
