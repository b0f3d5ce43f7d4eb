// Tags in the console: the address carries them as repeated `tag=key=value` parameters (every
// one must match, as `baton list --tag` and `filter.tags` have it), and an execution's tags show
// as chips that, clicked, filter the executions by that tag. The tag rules themselves (key
// shape, lengths) are the API's: a tag it refuses comes back as its BAD_USER_INPUT, naming it.
import { html, Link } from './shared.js';

/** `customer=c-42` → { key, value } (the first `=` splits, as `--tag` does), or { problem }. */
export function parseTag(text) {
  const at = text.indexOf('=');
  if (at <= 0 || at === text.length - 1) return { problem: `tag "${text}" must be key=value, like customer=c-42` };
  return { key: text.slice(0, at), value: text.slice(at + 1) };
}

export const tagText = (key, value) => `${key}=${value}`;

/** The address's tags as the API's `filter.tags` (a later tag of a key replaces an earlier one), and the problems. */
export function tagsFilterOf(params) {
  const tags = {};
  const problems = [];
  for (const text of params.getAll('tag')) {
    const tag = parseTag(text);
    if ('problem' in tag) problems.push(tag.problem);
    else tags[tag.key] = tag.value;
  }
  return { tags: Object.keys(tags).length ? tags : undefined, problems };
}

/** The tag texts with `text` added (replacing any tag of the same key). */
export function withTag(texts, text) {
  const { key } = parseTag(text);
  return [...texts.filter((t) => parseTag(t).key !== key), text];
}

/**
 * An execution's tags as chips, each a link to `to(text)` (the executions filtered by it).
 * @param {{ tags: Record<string, string> | null | undefined, to: (text: string) => object, testId?: string }} props
 */
export function TagChips({ tags, to, testId = 'tag-chip' }) {
  const entries = Object.entries(tags ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (entries.length === 0) return null;
  return html`<span class="tags">${entries.map(([key, value]) => {
    const text = tagText(key, value);
    return html`<${Link} to=${to(text)} class="chip tag" title=${`Executions tagged ${text}`} data-testid=${testId} data-tag=${text}>${text}</${Link}>`;
  })}</span>`;
}
