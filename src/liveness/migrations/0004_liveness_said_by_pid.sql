-- The pid of the process that wrote a row's namespaces and transport (0003). A worker of an
-- earlier build taking over a row (the same worker id, after a crash or in a rollback) rewrites
-- pid but not those columns: they are believed only while said_by_pid is the row's pid, else
-- read as NULL (not said).
ALTER TABLE baton_worker_liveness ADD COLUMN said_by_pid int;
