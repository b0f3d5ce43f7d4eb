import pg from 'pg';
const D = '/work/main/dist/src';
const { withScratchDatabase } = await import(`${D}/bench/scratch-database.js`);
const { createPostgresEventStore } = await import(`${D}/eventstore/postgres.js`);
const { createExecutionRuntime } = await import(`${D}/runtime/execution-runtime.js`);
const admin = new pg.Pool({ connectionString: process.env.BATON_DATABASE_URL, max: 2 });
await withScratchDatabase({ pool: admin, databaseUrl: process.env.BATON_DATABASE_URL }, 40, async ({ pool }) => {
  const store = createPostgresEventStore(pool);
  const rt = createExecutionRuntime(store, process.env.MAXC ? { maxCached: Number(process.env.MAXC) } : {});
  if (process.argv[2] === 'single') {
    let n = 0; const t = performance.now();
    await Promise.all(Array.from({ length: 32 }, async () => { while (performance.now() - t < 5000) { await rt.submit({ action: 'core.echo', input: { n: n++ } }); } }));
    console.log('singles', n);
  }
  const orig = store.appendMany; const am = [];
  store.appendMany = async (r) => { const t = performance.now(); try { return await orig(r); } finally { am.push(performance.now() - t); } };
  const s = [];
  for (let i = 0; i < 20; i++) {
    const t = performance.now(); await rt.submitMany(Array.from({ length: 500 }, (_, j) => ({ action: 'core.echo', input: { i: i * 500 + j } }))); s.push(performance.now() - t);
    if (i === 10) { const w = await admin.query(`SELECT backend_type, wait_event_type, wait_event, state, left(query, 50) q FROM pg_stat_activity WHERE datname = current_database() AND state <> 'idle'`); }
  }
  s.sort((a, b) => a - b); am.sort((a, b) => a - b);
  console.log(`submitMany p50 ${s[10].toFixed(1)} p90 ${s[18].toFixed(1)}; appendMany p50 ${am[10].toFixed(1)}`);
  const st = await pool.query(`SELECT relname, n_live_tup, last_autovacuum, last_autoanalyze FROM pg_stat_user_tables WHERE relname IN ('baton_events','baton_streams')`);
  console.log(st.rows);
  await store.close();
});
await admin.end();
