-- Workload behind pg15-capture.txt (PostgreSQL 15.x, wal_level=logical). Captured with:
--   SELECT lsn, xid, encode(data, 'hex') FROM pg_logical_slot_peek_binary_changes('s', NULL, NULL,
--     'proto_version', '1', 'publication_names', 'pub', 'messages', 'true');
CREATE TYPE mood AS ENUM ('sad','happy');
CREATE TABLE users (id int PRIMARY KEY, name varchar(64), bio text, m mood);
ALTER TABLE users ALTER COLUMN bio SET STORAGE EXTERNAL;  -- uncompressed TOAST: `u` without 8 KB of noise
CREATE TABLE audit (id int, note text);
ALTER TABLE audit REPLICA IDENTITY FULL;
CREATE PUBLICATION pub FOR TABLE users, audit;
SELECT 'init' FROM pg_create_logical_replication_slot('s', 'pgoutput');
INSERT INTO users VALUES (1, 'ann', NULL, 'happy'), (2, 'bob', 'hi', NULL);
UPDATE users SET name = 'anne' WHERE id = 1;
UPDATE users SET id = 10 WHERE id = 2;
INSERT INTO users VALUES (3, 'big', repeat('x', 10000), 'sad');
UPDATE users SET name = 'bigger' WHERE id = 3;
DELETE FROM users WHERE id = 1;
INSERT INTO audit VALUES (1, 'a');
UPDATE audit SET note = 'b';
DELETE FROM audit;
ALTER TABLE users ADD COLUMN email text;
INSERT INTO users VALUES (4, 'dan', NULL, NULL, 'd@x');
SELECT 'm' FROM pg_logical_emit_message(true, 'app', 'hello');
TRUNCATE users, audit RESTART IDENTITY CASCADE;
