// How Baton's Postgres pools treat a connection nobody is using: they keep it.
//
// node-postgres closes a connection after 10 s idle by default, and the next query on a new one
// pays for the connection and for its first calls: measured on the 2-core dev machine
// (2026-11-28), connecting took 12–19 ms and the first baton_append_many on a connection 24–26 ms
// (Postgres compiles the plpgsql function and plans its statement once per connection), against
// ~2 ms warm. So a submit after a quiet spell of 12 s took 26–35 ms where one 3 s after the last
// took 4–5 ms. A pool holds at most its `max` connections either way; it now just does not give
// them back while idle. `allowExitOnIdle` lets a process whose work is done exit with idle
// connections still open (they no longer time out to let it), and TCP keepalive finds a
// connection that a firewall or a restarted server dropped while it sat idle.
import type pg from 'pg';

export const KEEP_IDLE_CONNECTIONS = {
  idleTimeoutMillis: 0,
  allowExitOnIdle: true,
  keepAlive: true,
} as const satisfies pg.PoolConfig;
