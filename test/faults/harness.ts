// The fault-injection harness: a private Postgres cluster and a private nats-server that the
// scenarios may kill and restart at will (never the machine's shared ones), Baton hosts as real
// child processes (`node bin/baton.js executor|worker|projector`), and a scenario object that
// submits executions, injects faults, waits (bounded) for every execution to be terminal, runs
// the invariant checker and records one summary row per scenario. Each part is a module of its
// own; this is what the test files import.
export { BatonProcess, FAST_TIMEOUTS, FAULT_ACTIONS, REPO_ROOT } from './baton-process.ts';
export { useFaultEnvironment, type FaultEnvironment } from './environment.ts';
export { PrivateNats } from './private-nats.ts';
export { PrivatePostgres } from './private-postgres.ts';
export { makeRunDir } from './run-dirs.ts';
export { FaultScenario, runScenario, type WorkerOptions } from './scenario.ts';
export { summaryTable, type FaultSummary } from './summary.ts';
export { sleep, until } from './wait.ts';
