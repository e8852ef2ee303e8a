// Tiny DOM helpers and number formatting. Server text is only ever set through textContent.

/**
 * h('div', {class: 'x', 'data-testid': 'y', on: {click: fn}}, child, 'text', [more])
 * Attributes whose value is null/undefined/false are left off; true gives an empty attribute.
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'on') {
      for (const [type, fn] of Object.entries(value)) el.addEventListener(type, fn);
    } else if (key === 'text') {
      el.textContent = String(value);
    } else if (key === 'hidden') {
      el.hidden = Boolean(value);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

export function fmtScore(v) {
  return isNum(v) ? v.toFixed(2) : '—';
}

export function fmtMs(ms) {
  if (!isNum(ms)) return '—';
  if (ms >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  if (ms > 0 && ms < 1) return '<1 ms';
  return `${Math.round(ms)} ms`;
}

/** A wait in words, rounded up so a client told to wait that long is not refused again: '42 seconds',
 * '37 minutes', '1 hour' (the server's rate-limit message says it the same way). */
export function fmtWait(seconds) {
  const s = Math.max(1, Math.ceil(isNum(seconds) ? seconds : 1));
  if (s < 60) return `${s} second${s === 1 ? '' : 's'}`;
  const m = Math.ceil(s / 60);
  return m < 60 ? `${m} minute${m === 1 ? '' : 's'}` : '1 hour';
}

export function fmtUsd(v) {
  if (!isNum(v)) return '—';
  return `$${v.toFixed(v !== 0 && Math.abs(v) < 0.1 ? 4 : 2)}`;
}

export function fmtInt(v) {
  return isNum(v) ? Math.round(v).toLocaleString('en-US') : '—';
}

export function clamp01(v) {
  return Math.max(0, Math.min(1, isNum(v) ? v : 0));
}

/** The text with its first letter in upper case: a detail or message from the server, as a sentence. */
export const capitalise = (t) => t.charAt(0).toUpperCase() + t.slice(1);
