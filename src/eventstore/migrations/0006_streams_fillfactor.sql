-- baton_streams rows are updated by every append (revision, last_xid), three to five times in an
-- execution's first seconds. With pages filled to the brim a row's new version seldom fits beside
-- the old one, so about a third of those updates were not HOT: each also inserted into
-- baton_streams_pkey. Measured in a 20,000-execution `baton bench`: 12,617 of 35,030 updates not
-- HOT (pg_stat_user_tables). Half-full pages leave room for the versions to follow. Only pages
-- written from now on are affected; existing ones fill to the new limit as they are reused.
ALTER TABLE baton_streams SET (fillfactor = 50);
