// The API key a person pasted, for this tab only: sessionStorage, never localStorage (it would outlive the tab
// and reach every later visitor of this browser profile) and never a URL (it would land in history and logs).
const KEY = 'provenance.apiKey';

export function apiKey() {
  try { return sessionStorage.getItem(KEY) || null; } catch { return null; }
}

export function keepKey(key) {
  try {
    if (key) sessionStorage.setItem(KEY, key);
    else sessionStorage.removeItem(KEY);
  } catch { /* storage off: the key lasts as long as this page */ }
}

/** The request's headers, with the pasted key as a Bearer token when there is one. */
export function withKey(headers = {}) {
  const key = apiKey();
  return key ? { ...headers, Authorization: `Bearer ${key}` } : headers;
}
