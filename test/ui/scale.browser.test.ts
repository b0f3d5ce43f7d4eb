// Every view of the console with 10,000 executions in the store: pages come 50 at a time by
// cursor (never the whole table), and each answer stays small. The executions are copies of
// three real histories (completed, failed, waiting) appended in bulk (appendMany) and projected,
// not run one by one.
import { randomUUID } from 'node:crypto';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppendRequest } from '../../src/eventstore/event-store.ts';
import { deadline, useApi } from '../api/api-harness.ts';
import { CHROMIUM, POLL, openPage } from './console-harness.ts';

const TOTAL = 10_000;
const WORKFLOWS = 300;
const api = useApi({}, { transport: {} });
let browser: Browser | undefined;
/** GraphQL answers the pages got, in bytes. */
const answerSizes: number[] = [];

async function template(outcome: 'Completed' | 'Failed' | 'Requested'): Promise<string> {
  const { runtime } = api();
  const { executionId } = await runtime.submit({ action: `bulk.${outcome.toLowerCase()}`, input: { n: 1 } });
  if (outcome === 'Requested') return executionId;
  await runtime.dispatch(executionId, [
    { type: 'SchedulingStarted', data: {}, by: 'executor' },
    { type: 'ExecutionHandedOff', data: { workerId: 'w-bulk', attempt: 1, deadline: deadline() }, by: 'executor' },
  ]);
  await runtime.dispatch(executionId, { type: 'ExecutionStarted', data: { attempt: 1 }, by: 'worker:w-bulk' });
  await runtime.dispatch(
    executionId,
    outcome === 'Completed'
      ? { type: 'ExecutionCompleted', data: { result: { ok: true } }, by: 'worker:w-bulk' }
      : { type: 'ExecutionFailed', data: { error: { message: 'bulk failure' }, retryable: false }, by: 'worker:w-bulk' },
  );
  return executionId;
}

beforeAll(async () => {
  if (!browser) browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'], timeout: 30_000 });
  const { store } = api();
  const streams = await Promise.all((['Completed', 'Failed', 'Requested'] as const).map(async (o) => store.readStream(`execution-${await template(o)}`)));
  // 70% completed, 20% failed, 10% waiting; requested a second apart over the last ~3 hours;
  // every tenth a step of one of 300 workflows.
  const start = Date.now() - TOTAL * 1_000;
  const requests: AppendRequest[] = [];
  for (let i = 0; i < TOTAL; i++) {
    const events = streams[i % 10 < 7 ? 0 : i % 10 < 9 ? 1 : 2]!;
    const at = new Date(start + i * 1_000).toISOString();
    requests.push({
      streamId: `execution-${randomUUID()}`,
      expectedRevision: 'no_stream',
      events: events.map((e, revision) => ({
        eventId: randomUUID(),
        type: e.type,
        data: revision === 0 && i % 10 === 3 ? { ...(e.data as object), workflowId: `bulk-wf-${Math.floor(i / 10) % WORKFLOWS}` } : e.data,
        metadata: { ...e.metadata, occurredAt: at },
      })),
    });
  }
  for (let i = 0; i < requests.length; i += 500) {
    const outcomes = await store.appendMany(requests.slice(i, i + 500));
    const failed = outcomes.find((o) => !o.ok);
    if (failed && !failed.ok) throw failed.error;
  }
  await api().catchUp();
}, 240_000);

afterAll(async () => {
  await browser?.close();
});

async function open(path: string) {
  const w = await openPage(browser!, `${api().server.uiUrl}${path}`);
  w.page.on('response', (r) => {
    if (r.url().endsWith('/graphql')) void r.body().then((b) => answerSizes.push(b.length), () => undefined);
  });
  return w;
}

describe(`the console with ${TOTAL.toLocaleString('en')} executions`, () => {
  it('pages the executions 50 at a time by cursor, forward and back, and filtered', async () => {
    const { count } = (await api().db.pool.query(`SELECT count(*)::int AS count FROM baton_read.executions`)).rows[0];
    expect(count).toBe(TOTAL + 3);
    const { page, problems } = await open('');
    const rows = page.getByTestId('execution-row');
    await expect.poll(() => rows.count(), POLL).toBe(50);
    const firstPage = await rows.evaluateAll((r) => r.map((x) => x.getAttribute('data-id')));
    await page.getByTestId('pager-next').click();
    await expect.poll(() => page.getByTestId('pager-page').textContent(), POLL).toBe('page 2');
    await expect.poll(async () => (await rows.evaluateAll((r) => r.map((x) => x.getAttribute('data-id'))))[0] !== firstPage[0], POLL).toBe(true);
    const secondPage = await rows.evaluateAll((r) => r.map((x) => x.getAttribute('data-id')));
    expect(secondPage).toHaveLength(50);
    expect(secondPage.filter((id) => firstPage.includes(id))).toEqual([]);
    // The page is in the address: a reload shows the same one.
    expect(new URL(page.url()).searchParams.get('after')).toBeTruthy();
    await page.reload();
    await expect.poll(async () => (await rows.evaluateAll((r) => r.map((x) => x.getAttribute('data-id')))).join(), POLL).toBe(secondPage.join());
    expect(await page.getByTestId('pager-page').textContent()).toBe('page 2');
    await page.getByTestId('pager-next').click();
    await expect.poll(() => page.getByTestId('pager-page').textContent(), POLL).toBe('page 3');
    await page.getByRole('button', { name: 'Previous' }).click();
    await expect.poll(async () => (await rows.evaluateAll((r) => r.map((x) => x.getAttribute('data-id')))).join(), POLL).toBe(secondPage.join());

    await page.goto(`${api().server.uiUrl}?view=executions&status=Failed`);
    await expect.poll(() => rows.count(), POLL).toBe(50);
    expect(new Set(await page.locator('[data-testid="execution-row"] .badge').allTextContents())).toEqual(new Set(['Failed']));
    expect(await page.getByTestId('pager-next').isEnabled()).toBe(true);
    await page.close();
    expect(problems).toEqual([]);
  });

  it('opens the workflows, workers, actions and dead-letter views without loading every execution', async () => {
    const w = await open('?view=workflows');
    await expect.poll(() => w.page.getByTestId('workflow-row').count(), POLL).toBe(25);
    await w.page.getByTestId('pager-next').click();
    await expect.poll(() => w.page.getByTestId('pager-page').textContent(), POLL).toBe('page 2');
    await expect.poll(() => w.page.getByTestId('workflow-row').count(), POLL).toBe(25);

    await w.page.goto(`${api().server.uiUrl}?view=actions`);
    const completed = w.page.locator('[data-testid="action-card"][data-action="bulk.completed"]');
    await expect.poll(() => completed.locator('.stats').textContent(), POLL).toContain('Failure rate0.0 %');
    await expect.poll(() => w.page.locator('[data-testid="action-card"][data-action="bulk.requested"]').getByTestId('queued').textContent(), POLL).toBe('1001');
    await expect.poll(() => completed.locator('rect.bar').count(), POLL).toBeGreaterThan(0);

    await w.page.goto(`${api().server.uiUrl}?view=workers`);
    await w.page.locator('[data-testid="worker-row"][data-id="w-bulk"]').waitFor();
    await w.page.goto(`${api().server.uiUrl}?view=dead-letters`);
    await w.page.getByTestId('dead-letters-empty').waitFor();
    await w.page.close();
    expect(w.problems).toEqual([]);
    // Nothing answered with the table: the largest answer is a page's worth.
    expect(Math.max(...answerSizes)).toBeLessThan(256 * 1024);
  });
});
