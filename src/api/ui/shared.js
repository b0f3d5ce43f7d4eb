// What every view of the console shares: htm bound to Preact, the query hook (which asks the
// page for a token when the API wants one), polling for live views, the address as the page's
// state, and small formatters and widgets.
import { h } from './vendor/preact.mjs';
import { useEffect, useRef, useState } from './vendor/hooks.mjs';
import htm from './vendor/htm.mjs';
import { graphql, savedToken, TokenRequired } from './graphql.js';

export const html = htm.bind(h);
export { graphql };

let askForToken = () => undefined;
/** The shell's way to show the token form; set once by the app. */
export const onTokenRequired = (handler) => (askForToken = handler);

let tokenGeneration = 0;
const tokenListeners = new Set();
/** After a new token: every query runs again. */
export function tokenChanged() {
  tokenGeneration += 1;
  for (const listener of tokenListeners) listener(tokenGeneration);
}
function useTokenGeneration() {
  const [generation, setGeneration] = useState(tokenGeneration);
  useEffect(() => {
    tokenListeners.add(setGeneration);
    return () => tokenListeners.delete(setGeneration);
  }, []);
  return generation;
}

/**
 * Run `run()` whenever `key` changes (null: not now), and every `pollMs` while `pollMs` is set
 * (live views: the data shown stays until the next answer replaces it). Turning polling off only
 * stops it (no last load: a view switched off live keeps what it shows); turning it on loads at once.
 * @returns {{ loading: boolean, data?: any, error?: Error, reload: () => void }}
 */
export function useQuery(run, key, { pollMs } = {}) {
  const [result, setResult] = useState({ loading: key !== null });
  const [bump, setBump] = useState(0);
  const generation = useTokenGeneration();
  const runRef = useRef(run);
  runRef.current = run;
  const pollRef = useRef(pollMs);
  pollRef.current = pollMs;
  const timerRef = useRef(undefined);
  useEffect(() => {
    if (key === null) return setResult({ loading: false });
    let current = true;
    const once = (initial) => {
      if (initial) setResult((r) => ({ ...r, loading: true, error: undefined }));
      runRef.current().then(
        (data) => current && setResult({ loading: false, data }),
        (error) => {
          if (!current) return;
          if (error instanceof TokenRequired) askForToken(error.message);
          setResult((r) => ({ loading: false, data: initial ? undefined : r.data, error }));
        },
      ).finally(() => {
        if (current && pollRef.current) timerRef.current = setTimeout(() => once(false), pollRef.current);
      });
    };
    once(true);
    return () => {
      current = false;
      clearTimeout(timerRef.current);
    };
  }, [key, bump, generation]);
  const polled = useRef({ pollMs, key });
  useEffect(() => {
    const was = polled.current;
    polled.current = { pollMs, key };
    if (was.pollMs === pollMs) return; // the first render, or no change
    if (!pollMs) clearTimeout(timerRef.current);
    else if (!was.pollMs && was.key === key) setBump((n) => n + 1); // a new key loads anyway
  }, [pollMs, key]);
  return { ...result, reload: () => setBump((n) => n + 1) };
}

// What the token may do (the API's `access`): change things (cancel, retry, pause…; the admin
// token, a namespace token, or no tokens configured), and in which namespaces (a namespace
// token's: then workflows, schedules, workers, actions and dead letters are not its to read, and
// the console does not ask for them, so the browser shows no refused request). Asked once per token.
const ACCESS = 'query Access { access { mayChange namespaces } }';
let access = { token: undefined, answer: undefined };
/** The token's access, asked once per token: `{ mayChange, namespaces }` (namespaces null: every one). */
export function askAccess() {
  const token = savedToken();
  if (access.token !== token || !access.answer) {
    const answer = graphql(ACCESS).then(
      (data) => data.access,
      (error) => {
        if (access.answer === answer) access = { token: undefined, answer: undefined }; // ask again next time
        throw error;
      },
    );
    access = { token, answer };
  }
  return access.answer;
}

/** The useQuery result of askAccess: `data` is `{ mayChange, namespaces }` once known. */
export function useAccess() {
  return useQuery(askAccess, 'access');
}

/** True when this console's mutations go through, false when they need the admin token, undefined until known. */
export function useMayChange() {
  return useAccess().data?.mayChange;
}

// ---------------------------------------------------------------------------
// The address: /ui?view=…&…. Every view reads its state from it, so any view can be linked to.

export const readParams = () => new URLSearchParams(location.search);

/** `params` as a query string: empty values are dropped, an array is the parameter repeated (`tag=a=1&tag=b=2`). */
function searchOf(params) {
  const search = new URLSearchParams();
  const present = (v) => v !== undefined && v !== null && v !== '';
  for (const [k, v] of Object.entries(params)) for (const one of Array.isArray(v) ? v : [v]) if (present(one)) search.append(k, String(one));
  return search;
}

/** Go to `params` (an object; see searchOf), with `state` kept in the history entry; the app re-renders from the address. */
export function navigate(params, { replace = false, state = null } = {}) {
  const search = searchOf(params);
  const url = `${location.pathname}${search.size ? `?${search}` : ''}`;
  if (url === `${location.pathname}${location.search}`) return;
  if (replace) history.replaceState(state, '', url);
  else history.pushState(state, '', url);
  dispatchEvent(new Event('baton:navigate'));
}

/** The address's parameters as an object for navigate (a repeated one as an array). */
const objectOf = (params) => Object.fromEntries([...new Set(params.keys())].map((k) => [k, params.getAll(k)]));

export const hrefOf = (params) => {
  const search = searchOf(params);
  return `/ui${search.size ? `?${search}` : ''}`;
};

/** A real link (open in a new tab works) that navigates in place on a plain click. */
export function Link({ to, children, ...rest }) {
  const onClick = (e) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(to);
  };
  return html`<a href=${hrefOf(to)} onClick=${onClick} ...${rest}>${children}</a>`;
}

// ---------------------------------------------------------------------------
// Formatting.

/** "350 ms", "4.2 s", "3 min 5 s", "2 h 4 min" */
export function duration(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
  return `${Math.floor(ms / 3_600_000)} h ${Math.round((ms % 3_600_000) / 60_000)} min`;
}

/** An id shortened for a table: its last eight hex digits (new ids begin with their time, src/ids.ts, so their first eight are shared by everything made in the same minute). */
export const shortId = (id) => id.slice(-8);
export const shortTime = (iso) => (iso ? new Date(iso).toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' }) : '—');

export const Badge = ({ status }) => html`<span class=${`badge badge--${status}`}>${status}</span>`;

export const ErrorLine = ({ error }) => (error && !(error instanceof TokenRequired) ? html`<p class="error" role="alert">${error.message}</p>` : null);

/** An error object's message, whatever shape it came in ({ message }, a string, a truncation marker). */
export const errorMessage = (error) => (error == null ? undefined : typeof error === 'string' ? error : typeof error.message === 'string' ? error.message : undefined);

/**
 * Cursor paging for a connection, in the address: `after=<cursor>` names the page shown (none:
 * the first), so reload, Back and a link keep it, and new filters (an address without it) start
 * over. The cursors of the pages before it are kept in the history entry (reload and Back keep
 * that too), so Previous works without offsets; a link opened afresh has none: its page number
 * is unknown and only the first page is a click away.
 */
export function usePaging(params) {
  const after = params.get('after') || null;
  const kept = history.state?.pages;
  /** The cursors of pages 2 up to this one, when known. */
  const pages = !after ? [] : Array.isArray(kept) && kept.at(-1) === after ? kept : undefined;
  const go = (cursor, stack) => navigate({ ...objectOf(params), after: cursor }, { state: stack ? { pages: stack } : null });
  return {
    after,
    /** 1 for the first page; undefined for a page opened by a link. */
    page: pages ? pages.length + 1 : undefined,
    next: (cursor) => go(cursor, pages && [...pages, cursor]),
    back: () => pages?.length && go(pages.at(-2) ?? null, pages.slice(0, -1)),
    first: () => go(null, []),
  };
}

/** The pager of a list; `firstLabel` names its first page by the list's order (Newest, Oldest). */
export function Pager({ paging, pageInfo, testId = 'pager', firstLabel = 'Newest' }) {
  return html`<nav class="pager" aria-label="Pages" data-testid=${testId}>
    <button type="button" onClick=${paging.first} disabled=${paging.page === 1}>${firstLabel}</button>
    <button type="button" onClick=${paging.back} disabled=${!(paging.page > 1)}>Previous</button>
    <span class="muted" data-testid=${`${testId}-page`}>${paging.page ? `page ${paging.page}` : 'a later page'}</span>
    <button type="button" onClick=${() => paging.next(pageInfo.endCursor)} disabled=${!pageInfo?.hasNextPage} data-testid=${`${testId}-next`}>Next</button>
  </nav>`;
}

/** A yes/no question in the page (never window.confirm: a dialog the page controls, keyboard first). */
export function Confirm({ question, confirmLabel, onConfirm, onCancel, testId = 'confirm' }) {
  const yes = useRef(null);
  useEffect(() => yes.current?.focus(), []);
  return html`<div class="confirm" role="alertdialog" aria-modal="false" aria-label=${question} data-testid=${testId}>
    <p>${question}</p>
    <button type="button" class="danger" ref=${yes} onClick=${onConfirm} data-testid=${`${testId}-yes`}>${confirmLabel}</button>
    <button type="button" onClick=${onCancel}>Keep it</button>
  </div>`;
}
