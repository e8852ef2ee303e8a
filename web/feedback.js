// "Was this right?" under an answered or refused result: Yes or No, and a No asks which it was, with an
// optional note. Clicking again changes the verdict (the server keeps one per reader and answer). Every text
// the reader or the server wrote goes in through textContent (dom.js), never as HTML.
import { h, fmtWait } from './dom.js';

export const NOTE_MAX = 500;
const KINDS = [
  ['wrong_answer', 'The answer is wrong'],
  ['should_have_answered', 'It should have answered'],
  ['other', 'Something else'],
];
const KIND_WORDS = Object.fromEntries(KINDS);
let seq = 0;

/**
 * The block for one response, or null when there is nothing to rate (a blocked request). `send(body)` posts
 * {requestId, verdict, kind?, note?} and resolves to {res, data}.
 */
export function feedbackBlock(resp, send) {
  if (!resp || !resp.requestId || (resp.status !== 'answered' && resp.status !== 'refused')) return null;
  const id = `feedback-${++seq}`;
  const status = h('p', { class: 'feedback__status', role: 'status', 'aria-live': 'polite', 'data-testid': 'feedback-status' });
  const yes = h('button', { type: 'button', class: 'feedback__choice', 'aria-pressed': 'false', 'data-testid': 'feedback-yes', text: 'Yes' });
  const no = h('button', {
    type: 'button', class: 'feedback__choice', 'aria-pressed': 'false', 'aria-expanded': 'false',
    'aria-controls': `${id}-form`, 'data-testid': 'feedback-no', text: 'No',
  });
  const preset = resp.status === 'refused' ? 'should_have_answered' : 'wrong_answer';
  const radios = KINDS.map(([value, words]) => h('label', { class: 'feedback__kind' },
    h('input', { type: 'radio', name: `${id}-kind`, value, checked: value === preset, 'data-testid': `feedback-kind-${value}` }),
    h('span', { text: words })));
  const note = h('textarea', {
    id: `${id}-note`, class: 'feedback__note', rows: '2', maxlength: String(NOTE_MAX), 'data-testid': 'feedback-note',
    'aria-describedby': `${id}-count`,
  });
  const count = h('span', { id: `${id}-count`, class: 'feedback__count muted', text: `0 / ${NOTE_MAX}` });
  note.addEventListener('input', () => { count.textContent = `${note.value.length} / ${NOTE_MAX}`; });
  const submit = h('button', { type: 'submit', class: 'btn btn--primary feedback__send', 'data-testid': 'feedback-send', text: 'Send' });
  const form = h('form', { id: `${id}-form`, class: 'feedback__form', 'data-testid': 'feedback-form', hidden: true },
    h('fieldset', { class: 'feedback__kinds' }, h('legend', { text: 'What was wrong?' }), radios),
    h('label', { for: `${id}-note`, class: 'feedback__label', text: 'Anything to add? (optional)' }),
    note, count, h('div', {}, submit));

  let busy = false;
  const setPressed = (verdict) => {
    yes.setAttribute('aria-pressed', String(verdict === 'right'));
    no.setAttribute('aria-pressed', String(verdict === 'wrong'));
  };
  const say = (text, bad = false) => {
    status.textContent = text;
    status.classList.toggle('feedback__status--error', bad);
  };

  async function rate(body) {
    if (busy) return;
    busy = true;
    yes.disabled = no.disabled = submit.disabled = true;
    say('Sending…');
    try {
      let { res, data } = await send({ requestId: resp.requestId, ...body });
      // Another worker may not have written the answer down yet: ask once more, a moment later.
      if (res.status === 404) ({ res, data } = await later(() => send({ requestId: resp.requestId, ...body })));
      if (res.ok) {
        setPressed(body.verdict);
        form.hidden = true;
        no.setAttribute('aria-expanded', 'false');
        const what = body.verdict === 'right' ? 'that this was right' : `“${KIND_WORDS[body.kind] || 'it was wrong'}”`;
        say(`Thank you: you said ${what}. Click ${body.verdict === 'right' ? 'No' : 'Yes'} to change it.`);
      } else {
        say(failure(res, data), true);
      }
    } catch {
      say("Couldn't reach the service to send that; try again.", true);
    } finally {
      busy = false;
      yes.disabled = no.disabled = submit.disabled = false;
    }
  }

  yes.addEventListener('click', () => rate({ verdict: 'right' }));
  no.addEventListener('click', () => {
    const open = form.hidden;
    form.hidden = !open;
    no.setAttribute('aria-expanded', String(open));
    if (open) form.querySelector('input:checked')?.focus();
  });
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const kind = form.querySelector('input:checked')?.value || 'other';
    const text = note.value.trim();
    rate(text ? { verdict: 'wrong', kind, note: text } : { verdict: 'wrong', kind });
  });

  return h('section', { class: 'card feedback', 'aria-labelledby': `${id}-title`, 'data-testid': 'feedback' },
    h('div', { class: 'feedback__ask' },
      h('h3', { id: `${id}-title`, class: 'feedback__title', text: 'Was this right?' }),
      h('div', { class: 'feedback__choices', role: 'group', 'aria-labelledby': `${id}-title` }, yes, no)),
    form, status);
}

function later(fn) {
  return new Promise((resolve, reject) => { setTimeout(() => fn().then(resolve, reject), 1000); });
}

function failure(res, data) {
  const message = data && data.error && typeof data.error.message === 'string' ? data.error.message : '';
  if (res.status === 429) {
    const wait = Number.parseInt(res.headers.get('Retry-After') || '', 10);
    return `Too many ratings from here for now; try again in ${fmtWait(wait)}.`;
  }
  if (res.status === 404) return 'This answer can no longer be rated.';
  return message ? `Your rating was not kept: ${message}` : `Your rating was not kept (HTTP ${res.status}).`;
}
