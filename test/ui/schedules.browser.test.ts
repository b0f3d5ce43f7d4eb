// The console's Schedules view in headless Debian Chromium, on real schedules: a schedule host
// fires their ticks, the executor and worker run what they start, the projector keeps the read
// model current (console-harness.ts). The list shows target, trigger, status, next fire times and
// counts; a schedule's page its recent ticks, each a link to its execution; pause, resume,
// trigger and delete work from the keyboard after a confirmation with the admin token and are
// refused, visibly, for the read-only token. No page errors, console errors or CSP violations.
import type { Page } from 'playwright-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { gql } from '../api/api-harness.ts';
import { eventually } from '../support/workflow-cluster.ts';
import { builtinActions, createActionRegistry } from '../../src/actions/index.ts';
import { startApiServer } from '../../src/api/server.ts';
import { silentLogger } from '../../src/log.ts';
import { ADMIN_TOKEN, POLL, READ_TOKEN, openPage, screenshot, tabTo, useConsole, type WatchedPage } from './console-harness.ts';

const c = useConsole({ tokens: true, schedules: true });

const admin = async (query: string, variables: Record<string, unknown> = {}) => {
  const r = await gql(c().api.url, query, variables, { token: ADMIN_TOKEN });
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  return r.data!;
};
const scheduleOf = async (id: string) => (await admin(`query($id: ID!) { schedule(id: $id) { status fired nextFireTimes recentTicks { manual targetId } } }`, { id })).schedule;

beforeAll(async () => {
  await admin(`mutation { createSchedule(id: "heartbeat-echo", every: "2s", action: "core.echo", input: { ping: true }, overlap: "allow") { created } }`);
  await admin(`mutation { createSchedule(id: "nightly-billing", cron: "0 3 * * *", timezone: "Europe/Paris", action: "core.echo", input: { run: "billing" }) { created } }`);
  const workflow = { name: 'weekly-report', steps: [{ id: 'fetch', action: 'core.echo' }, { id: 'render', action: 'core.echo', dependsOn: ['fetch'] }] };
  await admin(`mutation($w: JSON!) { createSchedule(id: "weekly-report", cron: "0 8 * * 1", workflow: $w) { created } }`, { w: workflow });
  await admin(`mutation { pauseSchedule(id: "weekly-report", reason: "holidays") { changed } }`);
  // Two real ticks of heartbeat-echo, their executions run to the end.
  await eventually('two ticks of heartbeat-echo to fire', async () => ((await scheduleOf('heartbeat-echo')).fired >= 2 ? true : undefined), 20_000);
  await c().catchUp();
}, 60_000);

async function open(path: string, token = ADMIN_TOKEN): Promise<WatchedPage> {
  return openPage(c().browser, `${c().api.uiUrl}${path}`, { token });
}
async function done(w: WatchedPage, allowed: RegExp[] = []) {
  await w.page.close();
  expect(w.problems.filter((p) => !allowed.some((a) => a.test(p)))).toEqual([]);
}
const row = (page: Page, id: string) => page.locator(`[data-testid="schedule-row"][data-id="${id}"]`);
const REFUSED = [/^403 for POST .*\/graphql$/, /status of 403/];

describe('the schedules list', () => {
  it('shows each schedule with its target, trigger, status, next fire times and fired count, and opens one by keyboard', async () => {
    const w = await open('');
    const { page } = w;
    await tabTo(page, '[data-testid="nav-schedules"]');
    await page.keyboard.press('Enter');
    await row(page, 'heartbeat-echo').waitFor();
    expect(new URL(page.url()).searchParams.get('view')).toBe('schedules');

    const echo = row(page, 'heartbeat-echo');
    expect(await echo.getAttribute('data-status')).toBe('Active');
    expect(await echo.textContent()).toContain('every 2s');
    expect(await echo.textContent()).toContain('core.echo');
    await expect.poll(async () => Number(await echo.getByTestId('schedule-fired').textContent()), POLL).toBeGreaterThanOrEqual(2);
    expect(await echo.getByTestId('next-fire').textContent()).toMatch(/\(in \d+ s|\(now\)/);

    const billing = row(page, 'nightly-billing');
    expect(await billing.textContent()).toContain('0 3 * * *');
    expect(await billing.textContent()).toContain('Europe/Paris');
    expect(await billing.getByTestId('schedule-fired').textContent()).toBe('0');
    const report = row(page, 'weekly-report');
    expect(await report.getAttribute('data-status')).toBe('Paused');
    expect(await report.textContent()).toContain('workflow weekly-report');
    expect(await report.getByTestId('next-fire').count()).toBe(0); // none while paused
    await screenshot(page, 'ui-schedules');

    await tabTo(page, '[data-testid="schedule-status-filter"]');
    await page.getByTestId('schedule-status-filter').selectOption('Paused');
    await expect.poll(() => page.getByTestId('schedule-row').count(), POLL).toBe(1);
    expect(await row(page, 'weekly-report').count()).toBe(1);
    await page.getByTestId('schedule-status-filter').selectOption('');
    await row(page, 'heartbeat-echo').waitFor();

    await tabTo(page, '[data-testid="schedule-row"][data-id="heartbeat-echo"] a[href*="schedule="]');
    await page.keyboard.press('Enter');
    await expect.poll(() => new URL(page.url()).searchParams.get('schedule'), POLL).toBe('heartbeat-echo');
    await page.getByTestId('ticks-table').waitFor();
    await done(w);
  });
});

describe('a schedule page', () => {
  it('lists its recent ticks, each a link to the execution it started, with that execution status', async () => {
    const w = await open('?schedule=heartbeat-echo');
    const { page } = w;
    await expect.poll(() => page.getByTestId('tick-row').count(), POLL).toBeGreaterThanOrEqual(2);
    expect(await page.getByTestId('next-fire-times').locator('li').count()).toBe(5);
    expect(await page.getByTestId('tick-row').first().textContent()).toContain('on its trigger');
    // Every tick's execution is real and ran: its status shows beside the link.
    const ticks = (await scheduleOf('heartbeat-echo')).recentTicks as { targetId: string }[];
    const first = ticks.at(-1)!.targetId; // the newest: it stays among the latest five for a few ticks
    const tick = page.locator(`[data-testid="tick-row"][data-target="${first}"]`);
    await expect.poll(() => tick.locator('.badge').textContent(), POLL).toBe('Completed');
    await screenshot(page, 'ui-schedule');

    await tabTo(page, `[data-testid="tick-row"][data-target="${first}"] [data-testid="tick-target"]`);
    await page.keyboard.press('Enter');
    await expect.poll(() => new URL(page.url()).searchParams.get('execution'), POLL).toBe(first);
    await expect.poll(() => page.locator('.execution-status .badge').last().textContent(), POLL).toBe('Completed');
    expect(await page.locator('#execution-title').textContent()).toBe('core.echo');
    await done(w);
  });

  it('shows a paused schedule’s reason and no next fire times, and its workflow definition', async () => {
    const w = await open('?schedule=weekly-report');
    const { page } = w;
    await page.getByTestId('no-next-fire').waitFor();
    expect(await page.getByTestId('schedule-status').textContent()).toBe('Paused');
    expect(await page.locator('.facts').textContent()).toContain('holidays');
    await page.getByText('Workflow definition').click();
    expect(await page.locator('.definition-json pre').textContent()).toContain('"render"');
    expect(await page.getByTestId('no-ticks').textContent()).toContain('No tick has fired yet');
    await done(w);
  });
});

describe('changing a schedule', () => {
  it('refuses pausing to the read-only token, and the page says so', async () => {
    const w = await open('?schedule=nightly-billing', READ_TOKEN);
    const { page } = w;
    await page.getByTestId('schedule-pause').waitFor();
    await page.locator('.schedule-changes').getByText('needs the admin token').waitFor(); // once the console knows its token is read-only
    await page.getByTestId('schedule-pause').click();
    await page.getByTestId('confirm-yes').click();
    await page.getByRole('alert').filter({ hasText: 'Refused: mutations need the admin token' }).waitFor();
    expect((await scheduleOf('nightly-billing')).status).toBe('Active');
    await done(w, REFUSED);
  });

  it('pauses, resumes, triggers and deletes from the keyboard, each after a confirmation', async () => {
    const w = await open('?schedule=nightly-billing');
    const { page } = w;
    // The admin token may: no "needs the admin token" beside the buttons.
    await page.getByTestId('schedule-pause').waitFor();
    await page.waitForLoadState('networkidle');
    expect(await page.locator('.schedule-changes').getByText('needs the admin token').count()).toBe(0);
    const status = () => page.getByTestId('schedule-status').textContent();
    const confirmByKeyboard = async (button: string) => {
      await tabTo(page, `[data-testid="${button}"]`);
      await page.keyboard.press('Enter');
      await page.getByTestId('confirm').waitFor();
      await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute('data-testid')), POLL).toBe('confirm-yes');
      await page.keyboard.press('Enter');
    };

    // Keep it: nothing changes.
    await tabTo(page, '[data-testid="schedule-pause"]');
    await page.keyboard.press('Enter');
    await page.getByRole('button', { name: 'Keep it' }).click();
    expect(await page.getByTestId('confirm').count()).toBe(0);
    expect((await scheduleOf('nightly-billing')).status).toBe('Active');

    await confirmByKeyboard('schedule-pause');
    await page.getByTestId('schedule-outcome').filter({ hasText: 'paused' }).waitFor();
    await expect.poll(status, POLL).toBe('Paused');
    await page.getByTestId('no-next-fire').waitFor();
    expect((await scheduleOf('nightly-billing')).status).toBe('Paused');

    await confirmByKeyboard('schedule-resume');
    await page.getByTestId('schedule-outcome').filter({ hasText: 'resumed' }).waitFor();
    await expect.poll(status, POLL).toBe('Active');
    await page.getByTestId('next-fire-times').waitFor();

    await confirmByKeyboard('schedule-trigger');
    await page.getByTestId('schedule-outcome').filter({ hasText: 'Triggered' }).waitFor();
    // The read model has it a moment after the mutation answered.
    const manual = await eventually('the manual tick in the read model', async () => (await scheduleOf('nightly-billing')).recentTicks.find((t: { manual: boolean }) => t.manual), 10_000);
    const tick = page.locator(`[data-testid="tick-row"][data-target="${manual.targetId}"]`);
    await expect.poll(() => tick.textContent(), POLL).toContain('by hand');
    await expect.poll(() => tick.locator('.badge').textContent(), { ...POLL, timeout: 20_000 }).toBe('Completed');
    await expect.poll(() => page.getByTestId('schedule-fired').textContent(), POLL).toBe('1');

    await confirmByKeyboard('schedule-delete');
    await page.getByTestId('schedule-outcome').filter({ hasText: 'deleted' }).waitFor();
    await expect.poll(status, POLL).toBe('Deleted');
    await page.getByTestId('schedule-deleted').waitFor();
    expect((await scheduleOf('nightly-billing')).status).toBe('Deleted');
    await done(w);

    // Gone from the default list, shown under Deleted.
    const list = await open('?view=schedules');
    await row(list.page, 'heartbeat-echo').waitFor();
    expect(await row(list.page, 'nightly-billing').count()).toBe(0);
    await list.page.getByTestId('schedule-status-filter').selectOption('Deleted');
    await row(list.page, 'nightly-billing').waitFor();
    await done(list);
  });
});

describe('a server with no tokens', () => {
  it('shows a schedule’s changes without saying they need the admin token, and they work', async () => {
    const { db, store, runtime, transport } = c();
    const api = await startApiServer({ pool: db.pool, runtime, store, transport, actions: createActionRegistry([...builtinActions]), log: silentLogger(), port: 0 });
    try {
      const w = await openPage(c().browser, `${api.uiUrl}?schedule=heartbeat-echo`); // no token
      const { page } = w;
      await page.getByTestId('schedule-pause').waitFor();
      await page.waitForLoadState('networkidle');
      expect(await page.locator('.schedule-changes').getByText('needs the admin token').count()).toBe(0);
      await page.getByTestId('schedule-trigger').click();
      await page.getByTestId('confirm-yes').click();
      await page.getByTestId('schedule-outcome').filter({ hasText: 'Triggered' }).waitFor();
      await done(w);
    } finally {
      await api.close();
    }
  });
});

describe('paging the schedules', () => {
  it('keeps the page in the address: reload, Back and a link show the same page', async () => {
    for (let i = 0; i < 26; i++) {
      const id = `paged-${String(i).padStart(2, '0')}`;
      await admin(`mutation($id: ID!) { createSchedule(id: $id, cron: "0 4 1 1 *", action: "core.echo") { created } }`, { id });
      await admin(`mutation($id: ID!) { deleteSchedule(id: $id, reason: "paging test") { changed } }`, { id });
    }
    await c().catchUp();
    const w = await open('?view=schedules&status=Deleted');
    const { page } = w;
    const shown = () => page.getByTestId('schedule-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-id')));
    await expect.poll(async () => (await shown()).length, POLL).toBe(25);
    const first = await shown();
    await page.getByTestId('pager-next').click();
    await expect.poll(() => page.getByTestId('pager-page').textContent(), POLL).toBe('page 2');
    await expect.poll(async () => (await shown()).some((id) => first.includes(id!)), POLL).toBe(false);
    const second = await shown();
    expect(second.length).toBeGreaterThan(0);
    const address = new URL(page.url());
    expect(address.searchParams.get('status')).toBe('Deleted');
    expect(address.searchParams.get('after')).toBeTruthy();

    await page.reload();
    await expect.poll(() => shown(), POLL).toEqual(second);
    expect(await page.getByTestId('pager-page').textContent()).toBe('page 2');
    await page.goBack();
    await expect.poll(() => shown(), POLL).toEqual(first);
    expect(new URL(page.url()).searchParams.get('after')).toBeNull();
    await page.goForward();
    await expect.poll(() => shown(), POLL).toEqual(second);
    await page.getByRole('button', { name: 'Previous' }).click();
    await expect.poll(() => shown(), POLL).toEqual(first);
    expect(await page.getByTestId('pager-page').textContent()).toBe('page 1');
    await done(w);

    // The address alone, in a new tab: the same page; its number is not known, the first page is a click away.
    const linked = await open(`${address.search}`);
    await expect.poll(() => linked.page.getByTestId('schedule-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-id'))), POLL).toEqual(second);
    await linked.page.getByRole('button', { name: 'Newest' }).click();
    await expect.poll(() => linked.page.getByTestId('schedule-row').count(), POLL).toBe(25);
    await done(linked);
  });
});
