-- The namespaces a worker runs executions of (`baton worker --namespaces`), as its heartbeat
-- says: NULL is every namespace (and every worker that beat before this column). Read to say why
-- an execution waits ("no live worker offers action x to namespace y"), as the executor's
-- no-worker timeout already judges it from the workers' WorkerStarted events.
ALTER TABLE baton_worker_liveness ADD COLUMN namespaces text[];
-- The work transport it pulls from ('nats' or 'postgres'; NULL: not said, as before this column):
-- an executor places work only on workers of its own transport.
ALTER TABLE baton_worker_liveness ADD COLUMN transport text;
