// The operator console's views in headless Debian Chromium, on real executions: a real executor,
// worker host, orchestrator and projector run them (console-harness.ts). Each view is checked
// for what it shows, reached by keyboard, and kept free of page errors, console errors and CSP
// violations; mutations from the page are refused for the read-only token. Screenshots of each
// view go to artifacts/ (and docs/images/ with BATON_UI_SCREENSHOT_TO_DOCS=1).
import type { Page } from 'playwright-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { gql } from '../api/api-harness.ts';
import { eventually } from '../support/workflow-cluster.ts';
import { ADMIN_TOKEN, DEAD_ACTION, POLL, READ_TOKEN, TEAM_A_TOKEN, WORKER, openPage, screenshot, tabTo, useConsole, type WatchedPage } from './console-harness.ts';
import { executionIdForKey } from '../../src/runtime/execution-runtime.ts';

const c = useConsole({ tokens: true });
const ids: Record<string, string> = {};

const admin = (query: string, variables: Record<string, unknown> = {}) => gql(c().api.url, query, variables, { token: ADMIN_TOKEN });
async function submit(name: string, action: string, input: unknown, maxAttempts?: number) {
  const r = await admin(`mutation($action: String!, $input: JSON, $max: Int) { submitExecution(action: $action, input: $input, maxAttempts: $max) { executionId } }`, { action, input, max: maxAttempts });
  if (r.errors) throw new Error(JSON.stringify(r.errors));
  ids[name] = r.data!.submitExecution.executionId;
}
const statusOf = async (id: string) => (await admin(`query($id: ID!) { execution(id: $id) { status } }`, { id })).data!.execution?.status;
const FINAL = ['Completed', 'Failed', 'Cancelled', 'TimedOut', 'Abandoned'];

beforeAll(async () => {
  await submit('echo', 'core.echo', { hello: 'world' });
  await submit('echo2', 'core.echo', { hello: 'again' });
  await submit('fail', 'core.fail', { message: 'card declined', retryable: false });
  await submit('dead', DEAD_ACTION, null);
  await submit('flaky', 'core.fail', { message: 'connection reset by peer', retryable: true }, 2); // fails, retries once, fails
  const definition = {
    name: 'nightly-report',
    onFailure: 'continue',
    steps: [
      { id: 'fetch', action: 'core.echo', input: { rows: 3 } },
      { id: 'render', action: 'core.sleep', input: { ms: 40 }, dependsOn: ['fetch'] },
      { id: 'notify', action: 'core.fail', input: { message: 'mail server down', retryable: false }, dependsOn: ['fetch'] },
      { id: 'archive', action: 'core.echo', dependsOn: ['render'] },
    ],
  };
  const wf = await admin(`mutation($d: JSON!) { submitWorkflow(definition: $d, id: "nightly-report-1") { workflowId } }`, { d: definition });
  if (wf.errors) throw new Error(JSON.stringify(wf.errors));
  await eventually('the executions and the workflow to finish', async () => {
    const done = await Promise.all(['echo', 'echo2', 'fail', 'dead', 'flaky'].map(async (k) => FINAL.includes(await statusOf(ids[k]!))));
    const w = (await admin(`{ workflow(id: "nightly-report-1") { status } }`)).data!.workflow;
    return done.every(Boolean) && w?.status === 'Failed' ? true : undefined;
  }, 30_000);
  await c().catchUp();
}, 60_000);

async function open(path: string, token = ADMIN_TOKEN): Promise<WatchedPage> {
  return openPage(c().browser, `${c().api.uiUrl}${path}`, { token });
}
async function done(w: WatchedPage, allowed: RegExp[] = []) {
  await w.page.close();
  expect(w.problems.filter((p) => !allowed.some((a) => a.test(p)))).toEqual([]);
}
const text = (page: Page, testId: string) => () => page.getByTestId(testId).first().textContent();

describe('executions', () => {
  it('lists real executions, filters by status from the keyboard, and opens one', async () => {
    const w = await open('');
    const { page } = w;
    for (const k of ['echo', 'fail', 'dead']) await page.locator(`[data-testid="execution-row"][data-id="${ids[k]}"]`).waitFor();
    await screenshot(page, 'ui-executions');

    await tabTo(page, '[data-testid="filter-status"]');
    await page.getByTestId('filter-status').selectOption('Failed');
    await tabTo(page, '[data-testid="filter-apply"]');
    await page.keyboard.press('Enter');
    await expect.poll(() => new URL(page.url()).searchParams.get('status'), POLL).toBe('Failed');
    await expect.poll(async () => (await page.getByTestId('execution-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-id')))).includes(ids['fail']!), POLL).toBe(true);
    // The unfiltered rows stay shown until the filtered answer replaces them (and hold `fail` too): wait for it.
    await expect.poll(async () => new Set(await page.locator('[data-testid="execution-row"] .badge').allTextContents()), POLL).toEqual(new Set(['Failed']));
    expect(await page.locator(`[data-testid="execution-row"][data-id="${ids['echo']}"]`).count()).toBe(0);

    await tabTo(page, `[data-testid="execution-row"][data-id="${ids['fail']}"] a`);
    await page.keyboard.press('Enter');
    await expect.poll(text(page, 'execution-error'), POLL).toContain('card declined');
    expect(new URL(page.url()).searchParams.get('execution')).toBe(ids['fail']);
    await done(w);
  });
});

describe('live updates', () => {
  it('shows a new execution on the newest page without a reload, and stops when live is off', async () => {
    const w = await open('?view=executions&action=core.sleep');
    const { page } = w;
    await page.getByTestId('executions-table').waitFor();
    let reloads = 0;
    page.on('framenavigated', () => (reloads += 1));
    await submit('live', 'core.sleep', { ms: 10 });
    await page.locator(`[data-testid="execution-row"][data-id="${ids['live']}"]`).waitFor();
    await expect.poll(() => page.locator(`[data-testid="execution-row"][data-id="${ids['live']}"] .badge`).first().textContent(), POLL).toBe('Completed');
    expect(reloads).toBe(0);

    await tabTo(page, '[data-testid="live-toggle"]');
    // Turning live off asks for nothing more: a last load then could show what came after.
    let listQueries = 0;
    page.on('request', (r) => void (r.postData()?.includes('query Executions(') && (listQueries += 1)));
    await page.keyboard.press('Space');
    expect(await page.getByTestId('live-toggle').isChecked()).toBe(false);
    await submit('unseen', 'core.sleep', { ms: 10 });
    await c().catchUp();
    await new Promise((r) => setTimeout(r, 4_000)); // longer than the live refresh
    expect(await page.locator(`[data-testid="execution-row"][data-id="${ids['unseen']}"]`).count()).toBe(0);
    expect(listQueries).toBe(0);
    // Back on: it loads at once and shows what came meanwhile.
    await page.keyboard.press('Space');
    expect(await page.getByTestId('live-toggle').isChecked()).toBe(true);
    await page.locator(`[data-testid="execution-row"][data-id="${ids['unseen']}"]`).waitFor({ timeout: 1_500 }); // sooner than the 3 s poll: the load was immediate
    expect(reloads).toBe(0);
    await done(w);
  });
});

describe('the timeline, polished', () => {
  it('shows whole event names, where the handoff went, the error, and the statechart above the fold with every label in it', async () => {
    const w = await open(`?execution=${ids['flaky']}`);
    const { page } = w;
    // Two attempts: requested, then each attempt's handoff, start and end, and the retry between (8 events).
    await expect.poll(() => page.locator('.event-type').count(), POLL).toBeGreaterThanOrEqual(8);
    // No event name is cut off.
    const cut = await page.locator('.event-type').evaluateAll((els) => els.filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => e.textContent));
    expect(cut).toEqual([]);
    await page.getByTestId('handoff-1').waitFor();
    expect(await page.getByTestId('handoff-1').textContent()).toBe(`worker:${WORKER}`);
    expect(await page.locator('.event-type').allTextContents()).toContain('ExecutionRetryScheduled');
    await expect.poll(text(page, 'current-error'), POLL).toContain('connection reset by peer');
    await expect.poll(text(page, 'execution-error'), POLL).toContain('connection reset by peer');
    // The statechart starts above the fold at 1400×900, and its labels are inside the drawing.
    const chart = (await page.getByTestId('statechart').boundingBox())!;
    expect(chart.y).toBeLessThan(900 - 200);
    const outside = await page.getByTestId('statechart').evaluate((svg) => {
      const box = svg.getBoundingClientRect();
      return [...svg.querySelectorAll('text')].filter((t) => {
        const r = t.getBoundingClientRect();
        return r.left < box.left - 0.5 || r.right > box.right + 0.5;
      }).map((t) => t.textContent);
    });
    expect(outside).toEqual([]);
    await done(w);
  });

  it('follows a running execution until it ends', async () => {
    // Long enough to be seen running under CI's load: there the read model (caught up every 200 ms
    // in global order, behind other test files' open transactions on the same server) and the page
    // took longer than a 2.5 s run, and the first badge the page showed was already Completed.
    await submit('slow', 'core.sleep', { ms: 6_000 });
    const w = await open(`?execution=${ids['slow']}`);
    await expect.poll(() => w.page.locator('.execution-status .badge').textContent(), POLL).toMatch(/^(Requested|Scheduling|Scheduled|Running)$/);
    await expect.poll(() => w.page.locator('.execution-status .badge').textContent(), POLL).toBe('Completed');
    await expect.poll(() => w.page.getByTestId('revision-value').textContent(), POLL).toMatch(/^(\d+) \/ \1$/); // at the newest revision
    await done(w);
  });

  it('shows an execution opened before it was projected once it is, without a reload', async () => {
    const key = `opened-early-${Date.now()}`;
    const id = executionIdForKey(key);
    const w = await open(`?execution=${id}`);
    await expect.poll(() => w.page.getByRole('status').textContent(), POLL).toContain(`No execution ${id}`);
    let reloads = 0;
    w.page.on('framenavigated', () => (reloads += 1));
    const r = await admin(`mutation($key: String!) { submitExecution(action: "core.noop", input: null, idempotencyKey: $key) { executionId } }`, { key });
    expect(r.data!.submitExecution.executionId).toBe(id);
    await expect.poll(() => w.page.locator('.execution-status .badge').count(), POLL).toBe(1);
    expect(reloads).toBe(0);
    await done(w);
  });

  it('links a step execution to its parent and its workflow', async () => {
    const steps = (await admin(`{ workflow(id: "nightly-report-1") { steps { id executionId } } }`)).data!.workflow.steps;
    const stepOf = (id: string) => steps.find((s: { id: string }) => s.id === id).executionId;
    const w = await open(`?execution=${stepOf('render')}`);
    await w.page.getByTestId('parent-link').click();
    await expect.poll(() => new URL(w.page.url()).searchParams.get('execution'), POLL).toBe(stepOf('fetch'));
    await w.page.getByTestId('execution-id').filter({ hasText: stepOf('fetch') }).waitFor();
    await w.page.getByTestId('workflow-link').click();
    await w.page.getByTestId('dag').waitFor();
    expect(new URL(w.page.url()).searchParams.get('workflow')).toBe('nightly-report-1');
    await done(w);
  });

  it('draws a what-if on the statechart, and stores nothing', async () => {
    const before = (await c().store.readStream(`execution-${ids['echo']}`)).length;
    const w = await open(`?execution=${ids['echo']}&revision=2`); // requested, handed off, started
    const { page } = w;
    await expect.poll(text(page, 'current-state'), POLL).toBe('Running');
    await tabTo(page, '[data-testid="what-if-event"]');
    await page.getByTestId('what-if-event').selectOption({ label: `ExecutionFailed (by worker:${WORKER})` });
    await tabTo(page, '[data-testid="what-if-run"]');
    await page.keyboard.press('Enter');
    await expect.poll(text(page, 'what-if-result'), POLL).toContain('Running → Requested');
    await page.getByTestId('fork-edge-Running-Requested').waitFor();
    await expect.poll(() => page.getByTestId('state-Requested').getAttribute('data-fork-end'), POLL).toBe('true');
    await screenshot(page, 'ui-what-if');
    expect((await c().store.readStream(`execution-${ids['echo']}`)).length).toBe(before);
    await done(w);
  });
});

describe('workflows', () => {
  it('lists the workflow, draws its DAG coloured by status, and opens a step by keyboard', async () => {
    const w = await open('?view=workflows');
    const { page } = w;
    await page.locator('[data-testid="workflow-row"][data-id="nightly-report-1"]').waitFor();
    await tabTo(page, '[data-testid="workflow-row"][data-id="nightly-report-1"] a');
    await page.keyboard.press('Enter');
    await page.getByTestId('dag').waitFor();
    const statuses = Object.fromEntries(
      await Promise.all(['fetch', 'render', 'notify', 'archive'].map(async (s) => [s, await page.getByTestId(`dag-step-${s}`).getAttribute('data-status')])),
    );
    expect(statuses).toEqual({ fetch: 'Completed', render: 'Completed', notify: 'Failed', archive: 'Completed' });
    expect(await page.getByTestId('dag-edge-fetch-notify').count()).toBe(1);
    await screenshot(page, 'ui-workflow');
    await tabTo(page, '[data-testid="dag-step-notify"]');
    await page.keyboard.press('Enter');
    await expect.poll(text(page, 'execution-error'), POLL).toContain('mail server down');
    await done(w);
  });

  it('lists a workflow’s executions from its page’s link and from the Workflow filter', async () => {
    const steps = (await admin(`{ workflow(id: "nightly-report-1") { steps { executionId } } }`)).data!.workflow.steps as { executionId: string }[];
    const stepIds = steps.map((s) => s.executionId).sort();
    const shown = (page: Page) => page.getByTestId('execution-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-id')).sort());
    const w = await open('?workflow=nightly-report-1');
    const { page } = w;
    await page.getByTestId('dag').waitFor();
    await page.getByRole('link', { name: 'its executions' }).click();
    await expect.poll(() => shown(page), POLL).toEqual(stepIds);
    expect(Object.fromEntries(new URL(page.url()).searchParams)).toEqual({ view: 'executions', workflow: 'nightly-report-1' });
    expect(await page.locator('h1').textContent()).toBe('Executions');
    expect(await page.getByTestId('filter-workflow').inputValue()).toBe('nightly-report-1');

    await page.getByRole('button', { name: 'Clear' }).click();
    await expect.poll(async () => (await shown(page)).length, POLL).toBeGreaterThan(stepIds.length);
    await page.getByTestId('filter-workflow').fill('nightly-report-1');
    await page.getByTestId('filter-workflow').press('Enter');
    await expect.poll(() => new URL(page.url()).searchParams.get('workflow'), POLL).toBe('nightly-report-1');
    await expect.poll(() => shown(page), POLL).toEqual(stepIds);
    await done(w);
  });

  it('opens a workflow whose id is typed in the search box, or named as an execution in the address', async () => {
    const w = await open('?view=workflows');
    const { page } = w;
    await tabTo(page, '[data-testid="execution-search"]');
    await page.keyboard.type('nightly-report-1');
    await page.keyboard.press('Enter');
    await page.getByTestId('dag').waitFor();
    expect(await page.locator('#workflow-title').textContent()).toBe('nightly-report');
    expect(Object.fromEntries(new URL(page.url()).searchParams)).toEqual({ workflow: 'nightly-report-1' });
    await done(w);

    // A generated workflow id is a UUID, as an execution id is.
    const d = { name: 'uuid-named', steps: [{ id: 'only', action: 'core.echo' }] };
    const r = await admin(`mutation($d: JSON!) { submitWorkflow(definition: $d) { workflowId } }`, { d });
    const id = r.data!.submitWorkflow.workflowId as string;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    const u = await open(`?execution=${id}`);
    await u.page.getByTestId('dag').waitFor();
    expect(await u.page.locator('#workflow-title').textContent()).toBe('uuid-named');
    expect(new URL(u.page.url()).searchParams.get('workflow')).toBe(id);
    await done(u);
  });

  it('cancels a running workflow from the page with the admin token; the read-only token is refused', async () => {
    const d = { name: 'long-run', steps: [{ id: 'wait', action: 'core.sleep', input: { ms: 60_000 } }] };
    await admin(`mutation($d: JSON!) { submitWorkflow(definition: $d, id: "long-run-1") { workflowId } }`, { d });
    const reader = await open('?workflow=long-run-1', READ_TOKEN);
    await reader.page.getByTestId('workflow-cancel').click();
    await reader.page.getByTestId('confirm-yes').click();
    await reader.page.getByRole('alert').filter({ hasText: 'Refused: mutations need the admin token' }).waitFor();
    await done(reader, [/^403 for POST .*\/graphql$/, /status of 403/]);

    const w = await open('?workflow=long-run-1');
    await tabTo(w.page, '[data-testid="workflow-cancel"]');
    await w.page.keyboard.press('Enter');
    await w.page.getByTestId('confirm-yes').waitFor();
    await expect.poll(() => w.page.evaluate(() => document.activeElement?.getAttribute('data-testid')), POLL).toBe('confirm-yes');
    await w.page.keyboard.press('Enter'); // the confirmation's button has the focus
    await w.page.getByTestId('cancel-outcome').waitFor();
    await expect.poll(() => w.page.locator('.execution-status .badge').textContent(), { ...POLL, timeout: 20_000 }).toBe('Cancelled');
    await done(w);
  });
});

describe('workers', () => {
  it('shows each worker alive with its load, actions and heartbeat age', async () => {
    const w = await open('?view=workers');
    const { page } = w;
    const row = page.locator(`[data-testid="worker-row"][data-id="${WORKER}"]`);
    await row.waitFor();
    expect(await row.getAttribute('data-condition')).toBe('alive');
    await expect.poll(() => row.getByTestId('heartbeat-age').textContent(), POLL).toMatch(/^\d+(\.\d)? (ms|s) ago$/);
    expect(await row.locator('.chip').allTextContents()).toContain('core.echo');
    expect(await page.locator('[data-testid="worker-row"][data-id="w-dead"]').getAttribute('data-condition')).toBe('alive');
    await screenshot(page, 'ui-workers');
    await tabTo(page, `[data-testid="worker-row"][data-id="${WORKER}"] a`);
    await page.keyboard.press('Enter');
    await expect.poll(() => new URL(page.url()).searchParams.get('worker'), POLL).toBe(WORKER);
    await done(w);
  });
});

describe('actions', () => {
  it('shows per action the failure rate, slots and charts of throughput and run time', async () => {
    const w = await open('?view=actions');
    const { page } = w;
    const card = (action: string) => page.locator(`[data-testid="action-card"][data-action="${action}"]`);
    await card('core.echo').waitFor();
    await expect.poll(() => card('core.fail').getByTestId('failure-rate').textContent(), POLL).toBe('100.0 %');
    expect(await card('core.sleep').getByTestId('slots').textContent()).toContain('held');
    await expect.poll(() => card('core.echo').locator('rect.bar').count(), POLL).toBeGreaterThan(0);
    await expect.poll(() => card('core.echo').locator('circle.dot').count(), POLL).toBeGreaterThan(0);
    await screenshot(page, 'ui-actions');
    await tabTo(page, '[data-testid="window"]');
    await page.getByTestId('window').selectOption('24h');
    await expect.poll(() => new URL(page.url()).searchParams.get('window'), POLL).toBe('24h');
    await done(w);
  });
});

describe('dead letters', () => {
  it('lists the dead letter of a real execution, shows it, refuses deleting it for the read-only token, and deletes it for the admin', async () => {
    const rowOf = (page: Page) => page.locator('[data-testid="dead-letter-row"]').filter({ hasText: DEAD_ACTION });
    const reader = await open('?view=dead-letters', READ_TOKEN);
    await rowOf(reader.page).first().waitFor();
    await rowOf(reader.page).first().getByTestId('dead-letter-show').click();
    await reader.page.getByText('needs the admin token').waitFor(); // the read-only token: said before trying
    await reader.page.getByTestId('dead-letter-delete').click();
    await reader.page.getByTestId('confirm-yes').click();
    await reader.page.getByRole('alert').filter({ hasText: 'Refused: mutations need the admin token' }).waitFor();
    await done(reader, [/^403 for POST .*\/graphql$/, /status of 403/]);

    const w = await open('?view=dead-letters');
    const { page } = w;
    const row = rowOf(page).first();
    await row.waitFor();
    const messageId = await row.getAttribute('data-id');
    await tabTo(page, `[data-testid="dead-letter-row"][data-id="${messageId}"] [data-testid="dead-letter-show"]`);
    await page.keyboard.press('Enter');
    await page.getByTestId('dead-letter-details').waitFor();
    // Oldest first: the pager's first page is the oldest.
    expect(await page.getByTestId('pager').locator('button').first().textContent()).toBe('Oldest');
    // With the admin token the changes go through: no hint that they need it.
    await page.waitForLoadState('networkidle');
    expect(await page.getByText('needs the admin token').count()).toBe(0);
    await screenshot(page, 'ui-dead-letters');
    await page.getByTestId('dead-letter-delete').click();
    await page.getByTestId('confirm-yes').click();
    await page.getByTestId('dead-letter-outcome').filter({ hasText: 'deleted' }).waitFor();
    await expect.poll(() => page.locator(`[data-testid="dead-letter-row"][data-id="${messageId}"]`).count(), POLL).toBe(0);
    expect(await c().transport.getDeadLetter(messageId!)).toBeUndefined();
    await done(w);
  });

  it('a retry of a dead letter whose execution has ended is refused after the confirmation, saying why, and the dead letter stays', async () => {
    await submit('dead2', DEAD_ACTION, null);
    const w = await open('?view=dead-letters');
    const row = w.page.locator('[data-testid="dead-letter-row"]').filter({ hasText: ids['dead2']!.slice(-8) });
    await expect.poll(async () => {
      if ((await row.count()) === 0) await w.page.getByRole('button', { name: 'Refresh' }).click();
      return row.count();
    }, { ...POLL, timeout: 20_000 }).toBe(1);
    const messageId = await row.getAttribute('data-id');
    await row.getByTestId('dead-letter-show').click();
    await w.page.getByTestId('dead-letter-retry').click();
    await w.page.getByTestId('confirm-yes').click();
    // The executor abandoned the execution when its message became a dead letter: published again, no worker would run it.
    await w.page.getByRole('alert').filter({ hasText: /is not published again: its execution .* has ended \(Abandoned\)/ }).waitFor();
    await done(w);
    expect(messageId).toBeTruthy();
    expect(await c().transport.getDeadLetter(messageId!)).toBeDefined();
  });
});

describe('a token limited to a namespace', () => {
  it('lists its namespace\'s executions and opens one, says which views need a token for every namespace, and sends nothing the API would refuse', async () => {
    const r = await gql(c().api.url, `mutation { submitExecution(action: "core.echo", input: { team: "a" }, namespace: "team-a") { executionId } }`, {}, { token: TEAM_A_TOKEN });
    const id = r.data!.submitExecution.executionId as string;
    await c().catchUp();
    const list = await open('', TEAM_A_TOKEN);
    await list.page.locator(`[data-testid="execution-row"][data-id="${id}"]`).waitFor();
    expect(await list.page.locator('[data-testid="execution-row"]').count()).toBe(1); // not the default namespace's
    await done(list);
    const one = await open(`?execution=${id}`, TEAM_A_TOKEN);
    await one.page.getByTestId('execution-id').filter({ hasText: id }).waitFor();
    await done(one);
    for (const view of ['workflows', 'schedules', 'workers', 'actions', 'dead-letters']) {
      const w = await open(`?view=${view}`, TEAM_A_TOKEN);
      await w.page.getByTestId('not-for-this-token').filter({ hasText: 'limited to namespace team-a' }).waitFor();
      await done(w); // no 403 in the browser's console
    }
  });
});

describe('GraphiQL', () => {
  it('opens with an example query instead of the stock welcome text', async () => {
    const res = await fetch(c().api.url, { headers: { accept: 'text/html', authorization: `Bearer ${ADMIN_TOKEN}` }, signal: AbortSignal.timeout(10_000) });
    const page = await res.text();
    expect(res.status).toBe(200);
    expect(page).toContain('query Overview');
    expect(page).toContain('executions(filter: { status: Failed }, first: 10)');
  });
});
