-- One row: this installation's id. What Baton names on servers it shares with other installations
-- derives from it: on a NATS server, each installation's work stream, subjects and consumers
-- (src/transport/nats/installation-names.ts). Before, every installation used BATON_WORK and
-- `worker-<id>` consumers, so two of them on one NATS server (two `baton dev` in two directories)
-- took each other's work. `database_name`: a copy of the database (CREATE DATABASE … TEMPLATE, a
-- restored dump under another name) is another installation, and takes a new id on first use.
CREATE TABLE IF NOT EXISTS baton_installation (
  singleton     boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  id            uuid NOT NULL DEFAULT gen_random_uuid(),
  database_name text NOT NULL DEFAULT current_database(),
  created_at    timestamptz NOT NULL DEFAULT now()
);
INSERT INTO baton_installation DEFAULT VALUES ON CONFLICT DO NOTHING;
