// The web timeline in headless Chromium (Debian's, never a downloaded one) against a real API:
// an execution that failed once, retried and completed; found from the list and the search box,
// opened by a deep link, scrubbed to revision 2 with the keyboard. A screenshot is kept in
// artifacts/ (and in docs/images/ with BATON_UI_SCREENSHOT_TO_DOCS=1).
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deadline, gql, useApi } from '../api/api-harness.ts';

const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOT = 'artifacts/ui-timeline.png';
const DOCS_SCREENSHOT = 'docs/images/ui-timeline.png';
const STEP_TIMEOUT_MS = 10_000;

const api = useApi();
let browser: Browser | undefined;
let executionId = '';
/** The open page's errors, console errors (a CSP violation is one) and failed requests. */
let problems: string[] = [];

/** For what the page shows after an interaction: it renders a moment later. */
const POLL = { timeout: STEP_TIMEOUT_MS, interval: 50 };
const textOf = (page: Page, testId: string) => () => page.getByTestId(testId).textContent();
const attributeOf = (page: Page, testId: string, name: string) => () => page.getByTestId(testId).getAttribute(name);

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install chromium); this test never downloads a browser`);
  }
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'], timeout: 30_000 });

  // Revisions: 0 Requested, 1 Scheduling, 2 Scheduled (worker:w1), 3 Running, 4 progress,
  // 5 failed → Requested, 6 retry scheduled, 7 Scheduling, 8 Scheduled (worker:w2), 9 Running,
  // 10 Completed. The pauses give the time ruler something to show.
  const { runtime } = api();
  ({ executionId } = await runtime.submit({ action: 'demo.resize-image', input: { url: 'https://example.com/cat.png', width: 640 } }));
  const steps: Parameters<typeof runtime.dispatch>[1][] = [
    { type: 'SchedulingStarted', data: {}, by: 'executor' },
    { type: 'ExecutionHandedOff', data: { workerId: 'w1', attempt: 1, deadline: deadline() }, by: 'executor' },
    { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w1' },
    { type: 'ExecutionProgressed', data: { details: { percent: 40 } }, by: 'worker:w1' },
    { type: 'ExecutionFailed', data: { error: { message: 'connection reset by peer' }, retryable: true }, by: 'worker:w1' },
    { type: 'ExecutionRetryScheduled', data: { attempt: 2, retryAt: new Date().toISOString(), reason: 'retryable failure' }, by: 'executor' },
    { type: 'SchedulingStarted', data: {}, by: 'executor' },
    { type: 'ExecutionHandedOff', data: { workerId: 'w2', attempt: 2, deadline: deadline() }, by: 'executor' },
    { type: 'ExecutionStarted', data: { attempt: 2 }, by: 'worker:w2' },
    { type: 'ExecutionCompleted', data: { result: { width: 640, bytes: 48213 } }, by: 'worker:w2' },
  ];
  for (const [i, step] of steps.entries()) {
    await pause(i === 3 || i === 4 ? 400 : 60);
    await runtime.dispatch(executionId, step);
  }
  await api().catchUp();
}, 90_000);

afterAll(async () => {
  await browser?.close();
});

async function openPage(url: string): Promise<Page> {
  const page = await browser!.newPage({ viewport: { width: 1400, height: 900 } });
  page.setDefaultTimeout(STEP_TIMEOUT_MS);
  problems = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`${r.status()} for ${r.request().method()} ${r.url()}`);
  });
  await page.goto(url, { timeout: STEP_TIMEOUT_MS });
  return page;
}

async function expectNoProblems(page: Page) {
  await page.close();
  expect(problems).toEqual([]);
}

/** The keys the UI marks as changed, read off the page. */
const markedChanged = (page: Page) =>
  page.locator('[data-testid="context"] [data-changed="true"]').evaluateAll((nodes) => nodes.map((n) => n.getAttribute('data-testid')!.slice('context-'.length)).sort());

describe('the timeline at /ui', () => {
  it('lists the execution, and opens it from the search box', async () => {
    const page = await openPage(api().server.uiUrl);
    await expect.poll(() => page.locator(`[data-testid="execution-row"][data-id="${executionId}"]`).count(), POLL).toBe(1);

    await page.getByLabel('Execution id').fill(executionId);
    await page.getByTestId('execution-open').click();
    await page.getByTestId('execution-id').filter({ hasText: executionId }).waitFor();
    expect(new URL(page.url()).searchParams.get('execution')).toBe(executionId);
    expect(await page.locator('[data-testid^="event-"]').count()).toBe(11);
    // It opens at the latest revision.
    await expect.poll(textOf(page, 'current-state'), POLL).toBe('Completed');
    await expect.poll(textOf(page, 'revision-value'), POLL).toBe('10 / 10');
    await expectNoProblems(page);
  });

  it('opens a deep link and scrubs to revision 2: Scheduled, handed to w1, on the statechart', async () => {
    const page = await openPage(`${api().server.uiUrl}?execution=${executionId}`);
    const slider = page.getByTestId('revision-slider');
    await slider.focus();
    await page.keyboard.press('Home');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');

    await expect.poll(textOf(page, 'revision-value'), POLL).toBe('2 / 10');
    await expect.poll(textOf(page, 'current-state'), POLL).toBe('Scheduled');
    await expect.poll(textOf(page, 'current-owner'), POLL).toBe('worker:w1');
    await expect.poll(textOf(page, 'current-attempt'), POLL).toBe('1');
    expect(new URL(page.url()).searchParams.get('revision')).toBe('2');

    // The changed keys are the API's, and they are the ones highlighted.
    const fromApi = await gql(api().url, `query($id: ID!) { execution(id: $id) { history { revision changed } } }`, { id: executionId });
    const changed = [...fromApi.data!.execution.history[2].changed].sort();
    expect(changed).toContain('owner');
    expect(await markedChanged(page)).toEqual(changed);

    await expect.poll(attributeOf(page, 'state-Scheduled', 'data-current'), POLL).toBe('true');
    expect(await page.getByTestId('statechart').locator('[data-current="true"]').count()).toBe(1);
    await expect.poll(attributeOf(page, 'state-Scheduling', 'data-visited'), POLL).toBe('true');
    await expect.poll(attributeOf(page, 'state-Running', 'data-visited'), POLL).toBe('false');
    await expect.poll(attributeOf(page, 'edge-Requested-Scheduling', 'data-traversed'), POLL).toBe('1');
    await expect.poll(attributeOf(page, 'edge-Scheduling-Scheduled', 'data-traversed'), POLL).toBe('1');
    await expect.poll(attributeOf(page, 'edge-Scheduling-Scheduled', 'class'), POLL).toContain('edge--last');
    await expect.poll(attributeOf(page, 'edge-Scheduled-Running', 'data-traversed'), POLL).toBe('0');
    await expectNoProblems(page);
  });

  it('draws the retry on the statechart, and keeps a screenshot', async () => {
    const page = await openPage(`${api().server.uiUrl}?execution=${executionId}&revision=2`);
    await expect.poll(textOf(page, 'current-state'), POLL).toBe('Scheduled');
    // A click on an event selects it too: the second start, after the retry.
    await page.getByTestId('event-9').click();
    await expect.poll(textOf(page, 'current-state'), POLL).toBe('Running');
    await expect.poll(textOf(page, 'current-owner'), POLL).toBe('worker:w2');
    await expect.poll(textOf(page, 'current-attempt'), POLL).toBe('2');
    await expect.poll(attributeOf(page, 'edge-Requested-Scheduling', 'data-traversed'), POLL).toBe('2');
    await expect.poll(attributeOf(page, 'edge-Running-Requested', 'data-traversed'), POLL).toBe('1');
    await expect.poll(attributeOf(page, 'edge-Requested-Requested', 'data-traversed'), POLL).toBe('1');
    await expect.poll(attributeOf(page, 'state-Completed', 'data-visited'), POLL).toBe('false');

    mkdirSync(path.dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true, timeout: STEP_TIMEOUT_MS });
    if (process.env.BATON_UI_SCREENSHOT_TO_DOCS === '1') {
      mkdirSync(path.dirname(DOCS_SCREENSHOT), { recursive: true });
      copyFileSync(SCREENSHOT, DOCS_SCREENSHOT);
    }
    await expectNoProblems(page);
  });
  it('shows a step whole when its context is over the value limit (the history brings a marker)', async () => {
    const note = `${'large '.repeat(4_000)}end`; // 24 KB, over the 16 KiB value limit
    const { executionId: large } = await api().runtime.submit({ action: 'demo.resize-image', input: { note } });
    await api().catchUp();
    const listed = await gql(api().url, `query($id: ID!) { execution(id: $id) { history { context } } }`, { id: large });
    expect(listed.data!.execution.history[0].context.$truncated).toBe(true);

    const page = await openPage(`${api().server.uiUrl}?execution=${large}`);
    await expect.poll(textOf(page, 'context-input'), POLL).toContain('large end');
    expect(await page.getByTestId('context').textContent()).not.toContain('$truncated');
    await expectNoProblems(page);
  });

  it('says so when an id is malformed or unknown', async () => {
    const page = await openPage(`${api().server.uiUrl}?execution=not-an-id`);
    await page.getByRole('alert').filter({ hasText: 'must be an execution id' }).waitFor();
    await page.getByLabel('Execution id').fill('0190c2d4-0000-7000-8000-000000000000');
    await page.getByLabel('Execution id').press('Enter');
    await page.getByRole('status').filter({ hasText: 'No execution 0190c2d4-0000-7000-8000-000000000000' }).waitFor();
    await expectNoProblems(page);
  });
});

describe('the timeline at /ui, when the API wants a token', () => {
  const guarded = useApi({ adminToken: 'ui-admin-token', readToken: 'ui-read-token' });

  it('serves the page without one, asks for one when GraphQL answers 401, and retries with it', async () => {
    const page = await openPage(guarded().server.uiUrl);
    await page.getByTestId('token-form').waitFor();
    await page.getByLabel('API token').fill('ui-read-token');
    await page.getByRole('button', { name: 'Use token' }).click();
    await page.getByTestId('executions-empty').waitFor();
    expect(await page.getByTestId('token-form').count()).toBe(0);
    // The 401s that asked for the token, and nothing else.
    expect(problems.filter((p) => !/^(401 for POST .*\/graphql|console error: .*401)/.test(p))).toEqual([]);
    expect(problems.length).toBeGreaterThan(0);
    await page.close();
  });
});
