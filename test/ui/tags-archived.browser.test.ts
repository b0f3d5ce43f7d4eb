// Tags and archived executions in the console, in headless Debian Chromium, on executions a real
// executor and worker ran (console-harness.ts). The executions list filters by tags typed as
// key=value (several, all must match) and shows each execution's tags as chips; a chip, in the
// list or on the timeline, filters by its tag, and so does a tag typed in the search box. Then retention archives them, and the timeline of
// one says so with its badge while still showing its history from the archive file. No page
// errors, console errors or CSP violations; everything is reached by keyboard.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executionArchivePath } from '../../src/retention/archive-file.ts';
import { runRetention } from '../../src/retention/retention.ts';
import { gql } from '../api/api-harness.ts';
import { eventually } from '../support/workflow-cluster.ts';
import { ADMIN_TOKEN, POLL, openPage, screenshot, tabTo, useConsole, type WatchedPage } from './console-harness.ts';

const c = useConsole({ tokens: true });
const ids: Record<string, string> = {};
let archiveDir = '';

const admin = async (query: string, variables: Record<string, unknown> = {}) => {
  const r = await gql(c().api.url, query, variables, { token: ADMIN_TOKEN });
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data!;
};
async function submit(name: string, action: string, input: unknown, tags?: Record<string, string>) {
  const r = await admin(`mutation($action: String!, $input: JSON, $tags: JSON) { submitExecution(action: $action, input: $input, tags: $tags) { executionId } }`, { action, input, tags });
  ids[name] = r.submitExecution.executionId;
}
const FINAL = ['Completed', 'Failed', 'Cancelled', 'TimedOut', 'Abandoned'];

beforeAll(async () => {
  archiveDir = await mkdtemp(path.join(os.tmpdir(), 'baton-ui-archive-'));
  await submit('eu', 'core.echo', { order: 1 }, { customer: 'c-42', region: 'eu' });
  await submit('us', 'core.echo', { order: 2 }, { customer: 'c-42', region: 'us' });
  await submit('other', 'core.fail', { message: 'card declined', retryable: false }, { customer: 'c-7', 'team.owner': 'billing' });
  await submit('plain', 'core.echo', { order: 4 });
  await eventually('the executions to finish', async () => {
    const statuses = await Promise.all(Object.values(ids).map(async (id) => (await admin(`query($id: ID!) { execution(id: $id) { status } }`, { id })).execution?.status));
    return statuses.every((s) => FINAL.includes(s)) ? true : undefined;
  }, 30_000);
  await c().catchUp();
}, 60_000);
afterAll(async () => {
  if (archiveDir) await rm(archiveDir, { recursive: true, force: true });
});

async function open(path: string): Promise<WatchedPage> {
  return openPage(c().browser, `${c().api.uiUrl}${path}`, { token: ADMIN_TOKEN });
}
async function done(w: WatchedPage) {
  await w.page.close();
  expect(w.problems).toEqual([]);
}
const shownIds = (page: Page) => page.getByTestId('execution-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-id')).sort());
const only = (...names: string[]) => names.map((n) => ids[n]!).sort();
const tagsInAddress = (page: Page) => new URL(page.url()).searchParams.getAll('tag');

describe('tags in the executions list', () => {
  it('shows each execution’s tags and filters by tags typed as key=value, several at once, from the keyboard', async () => {
    const w = await open('');
    const { page } = w;
    const row = page.locator(`[data-testid="execution-row"][data-id="${ids['eu']}"]`);
    await row.waitFor();
    expect(await row.getByTestId('tag-chip').allTextContents()).toEqual(['customer=c-42', 'region=eu']);
    expect(await page.locator(`[data-testid="execution-row"][data-id="${ids['plain']}"]`).getByTestId('tag-chip').count()).toBe(0);

    await tabTo(page, '[data-testid="filter-tag"]');
    await page.keyboard.type('customer=c-42');
    await page.keyboard.press('Enter');
    await expect.poll(() => tagsInAddress(page), POLL).toEqual(['customer=c-42']);
    await expect.poll(() => shownIds(page), POLL).toEqual(only('eu', 'us'));

    await tabTo(page, '[data-testid="filter-tag"]');
    await page.keyboard.type('region=eu');
    await page.keyboard.press('Enter');
    await expect.poll(() => tagsInAddress(page), POLL).toEqual(['customer=c-42', 'region=eu']);
    await expect.poll(() => shownIds(page), POLL).toEqual(only('eu'));
    expect(await page.getByTestId('filter-tag-chip').allTextContents()).toEqual(['customer=c-42×', 'region=eu×']);
    await screenshot(page, 'ui-tags');

    await tabTo(page, '[data-testid="filter-tag-chip"][data-tag="region=eu"] button');
    await page.keyboard.press('Enter');
    await expect.poll(() => tagsInAddress(page), POLL).toEqual(['customer=c-42']);
    await expect.poll(() => shownIds(page), POLL).toEqual(only('eu', 'us'));
    await done(w);
  });

  it('refuses a tag that is not key=value in the page, and shows the API’s refusal of a bad key naming it', async () => {
    const w = await open('?view=executions');
    const { page } = w;
    await page.getByTestId('execution-row').first().waitFor();
    await page.getByTestId('filter-tag').fill('c-42');
    await page.getByTestId('filter-apply').click();
    await page.getByRole('alert').filter({ hasText: 'tag "c-42" must be key=value, like customer=c-42' }).waitFor();
    expect(tagsInAddress(page)).toEqual([]);
    expect(await page.getByTestId('filter-tag').getAttribute('aria-invalid')).toBe('true');

    await page.getByTestId('filter-tag').fill('cust omer=c-42');
    await page.getByTestId('filter-apply').click();
    await page.getByRole('alert').filter({ hasText: 'filter.tags.cust omer: tag key "cust omer" may contain only letters' }).waitFor();
    expect(await page.getByTestId('execution-row').count()).toBe(0);
    await done(w);
  });

  it('lists nothing for a tag in the address that is not key=value, as for a key the API refuses', async () => {
    const w = await open('?view=executions&tag=bad');
    const { page } = w;
    await page.getByRole('alert').filter({ hasText: 'tag "bad" must be key=value, like customer=c-42' }).waitFor();
    await page.waitForLoadState('networkidle'); // whatever the page asked for has come and shown
    expect(await page.getByTestId('execution-row').count()).toBe(0);
    expect(await page.getByTestId('executions-empty').count()).toBe(0); // not "no executions match": nothing was asked
    await done(w);
  });

  it('filters by a tag when its chip in a row is clicked, keeping the other filters', async () => {
    const w = await open('?view=executions&status=Failed');
    const { page } = w;
    const chip = page.locator(`[data-testid="execution-row"][data-id="${ids['other']}"] [data-tag="customer=c-7"]`);
    await chip.waitFor();
    await chip.click();
    await expect.poll(() => tagsInAddress(page), POLL).toEqual(['customer=c-7']);
    expect(new URL(page.url()).searchParams.get('status')).toBe('Failed');
    await expect.poll(() => shownIds(page), POLL).toEqual(only('other'));
    await done(w);
  });
});

describe('the search box', () => {
  it('finds the executions with a tag typed as key=value, and still opens an execution by id', async () => {
    const w = await open(`?execution=${ids['plain']}`);
    const { page } = w;
    await page.getByTestId('execution-id').waitFor();
    await tabTo(page, '[data-testid="execution-search"]');
    await page.keyboard.type('team.owner=billing');
    await page.keyboard.press('Enter');
    await expect.poll(() => tagsInAddress(page), POLL).toEqual(['team.owner=billing']);
    await expect.poll(() => shownIds(page), POLL).toEqual(only('other'));
    await page.getByTestId('execution-search').fill(ids['eu']!);
    await page.getByTestId('execution-search').press('Enter');
    await expect.poll(() => page.getByTestId('execution-id').textContent(), POLL).toBe(ids['eu']);
    await done(w);
  });
});

describe('tags on the timeline', () => {
  it('shows the execution’s tags; a tag reached by keyboard lists the executions with it', async () => {
    const w = await open(`?execution=${ids['us']}`);
    const { page } = w;
    await page.locator('.execution-tags').waitFor();
    expect(await page.locator('.execution-tags [data-testid="tag-chip"]').allTextContents()).toEqual(['customer=c-42', 'region=us']);
    await tabTo(page, '.execution-tags [data-tag="region=us"]');
    await page.keyboard.press('Enter');
    await expect.poll(() => tagsInAddress(page), POLL).toEqual(['region=us']);
    expect(new URL(page.url()).searchParams.get('view')).toBe('executions');
    await expect.poll(() => shownIds(page), POLL).toEqual(only('us'));
    await done(w);
  });
});

describe('an archived execution', () => {
  it('opens from its archive file with the archived badge, its history and its tags', async () => {
    const summary = await runRetention({ pool: c().db.pool, store: c().store, olderThanMs: 60_000, archiveDir, now: () => new Date(Date.now() + 3_600_000) });
    expect(summary.executions, JSON.stringify(summary.skipped)).toBe(4);

    const w = await open(`?execution=${ids['eu']}`);
    const { page } = w;
    await page.getByTestId('archived').waitFor();
    expect(await page.getByTestId('archived').textContent()).toBe('archived');
    expect(await page.getByTestId('archived').getAttribute('title')).toBe(`Archived by retention to ${executionArchivePath(archiveDir, ids['eu']!)}`);
    expect(await page.getByTestId('archived-at').textContent()).toContain('read from its archive file');
    expect(await page.locator('.execution-status .badge').last().textContent()).toBe('Completed');
    // The history comes from the file: every event, the slider at the newest, the chart drawn.
    const { events } = (await admin(`query($id: ID!) { execution(id: $id) { archived { events } } }`, { id: ids['eu'] })).execution.archived;
    expect(events).toBeGreaterThanOrEqual(4); // requested, handed off, started, completed
    expect(await page.locator('.event-type').count()).toBe(events);
    expect(await page.getByTestId('revision-value').textContent()).toBe(`${events - 1} / ${events - 1}`);
    await page.getByTestId('statechart').waitFor();
    expect(await page.locator('.execution-tags [data-testid="tag-chip"]').allTextContents()).toEqual(['customer=c-42', 'region=eu']);
    await screenshot(page, 'ui-archived');
    // Scrubbing works on it as on any other, by keyboard.
    await tabTo(page, '[data-testid="revision-slider"]');
    await page.keyboard.press('Home');
    await expect.poll(() => page.getByTestId('revision-value').textContent(), POLL).toBe(`0 / ${events - 1}`);
    expect(await page.getByRole('alert').count()).toBe(0);
    await done(w);

    // The list no longer has it: it left the read model.
    const list = await open('?view=executions');
    await list.page.getByTestId('executions-empty').waitFor();
    await done(list);
  });
});
