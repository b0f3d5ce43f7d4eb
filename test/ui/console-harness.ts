// What the console's browser tests run against: a real executor, a real worker host, a workflow
// orchestrator and the API over one fresh database and the Postgres work transport, with the
// projector catching up every 200 ms; and headless Debian Chromium (never a downloaded one),
// each page watched for page errors, console errors (a CSP violation is one) and failed requests.
// Worker "w-dead" is a liveness row and a consumer that refuses every delivery: what the
// executor hands it becomes a real dead letter (max-deliver 1). With `schedules`, a schedule
// host fires schedules' ticks as every executor process runs one.
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';
import { builtinActions, createActionRegistry } from '../../src/actions/index.ts';
import { startApiServer, type ApiServer } from '../../src/api/server.ts';
import { createPostgresEventStore, type PostgresEventStore } from '../../src/eventstore/postgres.ts';
import { startExecutor, type Executor } from '../../src/executor/executor.ts';
import { createLivenessStore } from '../../src/liveness/liveness-store.ts';
import { silentLogger } from '../../src/log.ts';
import { catchUpReadModel } from '../../src/readmodel/group-follow.ts';
import { createExecutionRuntime, type ExecutionRuntime } from '../../src/runtime/execution-runtime.ts';
import { followActors } from '../../src/runtime/follow-actors.ts';
import { createScheduleRuntime } from '../../src/runtime/schedule-kind.ts';
import { startScheduleHost } from '../../src/schedule/schedule-host.ts';
import { createPostgresWorkTransport } from '../../src/transport/postgres/index.ts';
import type { Consumer, WorkTransport } from '../../src/transport/work-transport.ts';
import { startWorkerHost, type WorkerHost } from '../../src/worker/worker-host.ts';
import { startOrchestrator, type Orchestrator } from '../../src/workflow/orchestrator.ts';
import { createWorkflowRuntime } from '../../src/workflow/workflow-stream.ts';
import { startWorker } from '../api/api-harness.ts';
import { catchUpFully } from '../support/read-model.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

export const CHROMIUM = '/usr/bin/chromium';
export const STEP_TIMEOUT_MS = 10_000;
export const ADMIN_TOKEN = 'console-admin-token-0123';
export const READ_TOKEN = 'console-read-token-0123';
/** Limited to namespace team-a (BATON_API_NAMESPACE_TOKENS). */
export const TEAM_A_TOKEN = 'console-team-a-token-0123';
/** The real worker's id, and the one whose deliveries all fail. */
export const WORKER = 'w-console';
export const DEAD_WORKER = 'w-dead';
/** Only w-dead offers it, so its executions end as dead letters. */
export const DEAD_ACTION = 'core.noop';

/** For what the page shows after an interaction: it renders a moment later. */
export const POLL = { timeout: STEP_TIMEOUT_MS, interval: 50 };

export interface ConsoleFixture {
  db: TestDatabase;
  store: PostgresEventStore;
  runtime: ExecutionRuntime;
  transport: WorkTransport;
  api: ApiServer;
  browser: Browser;
  catchUp(): Promise<void>;
}

const log = silentLogger();

/** The cluster, API and browser for one test file, torn down after it. */
export function useConsole(o: { tokens?: boolean; schedules?: boolean } = {}): () => ConsoleFixture {
  let fixture: ConsoleFixture | undefined;
  const stops: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(`${CHROMIUM} is missing: install Debian's chromium (apt-get install chromium); this test never downloads a browser`);
    }
    const db = await createTestDatabase({ max: 30 });
    stops.push(() => db.drop());
    const store = createPostgresEventStore(db.pool);
    stops.push(() => store.close());
    const runtime = createExecutionRuntime(store);
    const transport = createPostgresWorkTransport(db.pool, { maxDeliver: 1 });
    stops.push(() => transport.close());
    const liveness = createLivenessStore(db.pool);
    const executor: Executor = startExecutor({ store, transport, workers: liveness, log });
    stops.push(() => executor.stop());
    const worker: WorkerHost = await startWorkerHost({
      workerId: WORKER,
      store,
      runtime,
      transport,
      liveness,
      actions: createActionRegistry(builtinActions.filter((a) => a.name !== DEAD_ACTION)),
      capacity: 8,
      log,
      heartbeatIntervalMs: 1_000,
    });
    stops.push(() => worker.stop('test over'));
    const orchestrator: Orchestrator = startOrchestrator({ store, log, sweepEveryMs: 0 });
    stops.push(() => orchestrator.stop());
    await Promise.all([executor.ready, orchestrator.ready]);
    if (o.schedules) {
      const actors = { schedules: createScheduleRuntime(store), executions: createExecutionRuntime(store), workflows: createWorkflowRuntime(store) };
      const follower = followActors({ store, runtimes: [actors.schedules, actors.executions.actors, actors.workflows], log, who: 'console-test' });
      const host = startScheduleHost({ store, actors: { ...actors, follower }, log, sweepEveryMs: 1_000 });
      stops.push(() => host.stop());
      stops.push(() => follower.stop());
      await host.ready;
    }

    // w-dead: announced, alive by its heartbeats, offering DEAD_ACTION, refusing every delivery.
    await startWorker(store, DEAD_WORKER, { actions: [DEAD_ACTION], capacity: 4 });
    const beat = () =>
      db.pool.query(
        `INSERT INTO baton_worker_liveness (worker_id, actions, runtimes, capacity, heartbeat_at) VALUES ($1, $2, '{node}', 4, now())
         ON CONFLICT (worker_id) DO UPDATE SET heartbeat_at = now(), draining = false`,
        [DEAD_WORKER, [DEAD_ACTION]],
      );
    await beat();
    const beating = setInterval(() => void beat().catch(() => undefined), 1_000);
    stops.push(async () => clearInterval(beating));
    const refusing: Consumer = await transport.consume(DEAD_WORKER, (d) => d.nak(), { concurrency: 2 });
    stops.push(() => refusing.stop());

    const api = await startApiServer({
      pool: db.pool,
      runtime,
      store,
      transport,
      actions: createActionRegistry([...builtinActions]),
      log,
      port: 0,
      ...(o.tokens && { adminToken: ADMIN_TOKEN, readToken: READ_TOKEN, namespaceTokens: `team-a=${TEAM_A_TOKEN}` }),
    });
    stops.push(() => api.close());
    // The projector, as `baton dev` runs it: the live views see changes within a moment.
    let projecting = true;
    const project = async () => {
      while (projecting) {
        await catchUpReadModel({ pool: db.pool, store }).catch(() => undefined);
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    const projector = project();
    stops.push(async () => {
      projecting = false;
      await projector;
    });
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'], timeout: 30_000 });
    stops.push(() => browser.close());
    fixture = { db, store, runtime, transport, api, browser, catchUp: () => catchUpFully(db.pool, store) };
  }, 90_000);
  afterAll(async () => {
    fixture = undefined;
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  }, 60_000);
  return () => {
    if (!fixture) throw new Error('useConsole(): only inside tests and hooks');
    return fixture;
  };
}

export interface WatchedPage {
  page: Page;
  /** Page errors, console errors (CSP violations among them) and failed requests so far. */
  problems: string[];
}

/** A page at 1400×900 with everything that goes wrong on it recorded, logged in with `token` when given. */
export async function openPage(browser: Browser, url: string, o: { token?: string } = {}): Promise<WatchedPage> {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.setDefaultTimeout(STEP_TIMEOUT_MS);
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`${r.status()} for ${r.request().method()} ${r.url()}`);
  });
  if (o.token) await page.addInitScript((token) => sessionStorage.setItem('baton.apiToken', token), o.token);
  await page.goto(url, { timeout: STEP_TIMEOUT_MS });
  return { page, problems };
}

/** Keep a screenshot in artifacts/ (and in docs/images/ with BATON_UI_SCREENSHOT_TO_DOCS=1). */
export async function screenshot(page: Page, name: string): Promise<void> {
  const file = `artifacts/${name}.png`;
  mkdirSync(path.dirname(file), { recursive: true });
  await page.screenshot({ path: file, fullPage: false, timeout: STEP_TIMEOUT_MS });
  if (process.env.BATON_UI_SCREENSHOT_TO_DOCS === '1') {
    mkdirSync('docs/images', { recursive: true });
    copyFileSync(file, `docs/images/${name}.png`);
  }
}

/** Press Tab until the focused element matches `selector` (bounded): proof it is keyboard reachable. */
export async function tabTo(page: Page, selector: string, maxTabs = 80): Promise<void> {
  for (let i = 0; i < maxTabs; i++) {
    await page.keyboard.press('Tab');
    if (await page.evaluate((s) => document.activeElement?.matches(s) ?? false, selector)) return;
  }
  throw new Error(`${selector} was not reached with ${maxTabs} presses of Tab`);
}
