//! The SQL of one chunk of the online copy: the short transaction it is read in, the keyset
//! query copying the next rows in primary-key order, the snapshot it was read under, and the
//! watermarks written around it in the WAL (docs/online-copy-facts.md, §1-§5).
//!
//! Every name and literal is quoted here (the simple query protocol has no parameters):
//! names with [`quote_ident`], as the snapshot's copy does, values with [`pg_string`], which
//! means the same text whatever `standard_conforming_strings` says. Owns the statements;
//! never decides which chunk to read or what its rows mean.

use crate::catalog::questions::{quote_ident, QualifiedName};
use crate::pgoutput::Relation;
use crate::retract::literal::pg_string;

/// `SELECT pg_current_snapshot()::text`: the transaction's snapshot as `xmin:xmax:xip,...`
/// (read by `backfill::xid::TxSnapshot::parse`). In a `REPEATABLE READ` transaction this is
/// the transaction snapshot, the one every statement of it reads under: asked again after
/// the chunk's COPY it prints the same text while other sessions commit in between
/// (checked on 15.18, 17.10 and 18.4 by `tests/tests/backfill_keyset_real.rs`). The facts it
/// serves: a commit can be streamed before it is visible (§3, "A primary-side race"), so a
/// chunk records the snapshot it saw.
const SNAPSHOT_QUERY: &str = "SELECT pg_current_snapshot()::text";

/// See [`chunk_begin`].
const CHUNK_BEGIN: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; \
                           SELECT pg_current_snapshot()::text";

/// Opens a chunk's transaction and answers its snapshot, in one string (one round trip of
/// the simple query protocol: `BEGIN`'s command tag, then one row of [`snapshot_query`]).
/// One string rather than two because the snapshot query must be the transaction's first
/// statement: `REPEATABLE READ` takes the transaction snapshot at the first statement, so
/// the text answered is the snapshot the COPY that follows reads under. `READ ONLY`: a
/// chunk never writes (a watermark may still be emitted inside it, §2). The transaction
/// pins the horizon at its xmin while it lives (§4): commit it right after the COPY and
/// [`committed_but_running_query`].
pub fn chunk_begin() -> &'static str {
    CHUNK_BEGIN
}

/// The current transaction's snapshot, as [`chunk_begin`] answers it (see there for why
/// that one comes in the same string). Asked again inside the chunk's transaction it
/// answers the same text (the transaction snapshot, see the constant's doc).
pub fn snapshot_query() -> &'static str {
    SNAPSHOT_QUERY
}

/// Inside a chunk's transaction, after its COPY: the xids (decimal `xid8` text, one a row,
/// in the snapshot's ascending order) the transaction's snapshot lists as in progress whose
/// commit is written since it was taken. The chunk did not see their rows, and their
/// commits are in the WAL before this query's answer, so before a high watermark emitted
/// after it (§3, "A primary-side race"; design implication 2). `pg_current_snapshot()` here
/// is still the transaction's snapshot (see [`snapshot_query`]); `pg_snapshot_xip` is itself
/// a set-returning function (`unnest` of it does not exist).
///
/// Two tests, because `pg_xact_status` alone misses a case: it asks whether a transaction
/// is still in the proc array before it reads the commit log, so one whose commit record is
/// flushed and whose commit is in the commit log but which waits for a synchronous standby
/// (`RecordTransactionCommit` marks the commit log, then waits, and only then does the
/// transaction leave the proc array) reads "in progress" for as long as it waits. Its
/// backend shows in `pg_stat_activity` with `wait_event_type = 'IPC'`, `wait_event =
/// 'SyncRep'` and the transaction's xid as `backend_xid`, so an xid of the list is also
/// named when a backend of this database waits there with it (one of another database
/// cannot have changed this one's tables). The waits are read as they are when the query
/// runs, not as of the snapshot.
///
/// - `backend_xid` is `xid`, the list `xid8`: they are compared by the low 32 bits (`x::xid`
///   drops the epoch), which is exact, as the wraparound limit keeps every xid not yet
///   frozen (the list's and every running backend's) within 2^31 of the next xid, so no
///   two of them share their low 32 bits (checked with epoch 5 on 15.18).
/// - `pg_snapshot_xip` prints top-level xids only (a snapshot keeps subtransactions' xids
///   apart, overflowed or not), and `backend_xid` is the top-level xid, as pgoutput's Begin
///   carries it (checked with 100 writing savepoints).
/// - A backend finishing `COMMIT PREPARED` (or `ROLLBACK PREPARED`) shows no `backend_xid`
///   while it waits: a prepared transaction's commit waiting for a standby is not named.
/// - Nor is a transaction between its commit record's flush and the commit log's mark or
///   its wait (microseconds), nor one at or above the snapshot's `xmax` (the newest when
///   the snapshot was taken), which no snapshot list holds.
///
/// All of these are invisible to the snapshot (`xid::TxSnapshot::sees`), which is what
/// decides which keys are dropped.
///
/// What a role sees of another role's backend: `backend_xid` always, but `wait_event_type`
/// and `wait_event` (like `state`, `query` and the times) only when it has the privileges
/// of that backend's role or of `pg_read_all_stats` (a superuser, a member of `pg_monitor`);
/// otherwise they are NULL (15.18, 17.10, 18.4). Then that backend's wait is not named and
/// the query still succeeds, answering what `pg_xact_status` alone answers: a commit older
/// than a table's copy and still waiting when a chunk finishes makes the chunk stale
/// (docs/online-copy.md, "Reconciling a chunk with the stream";
/// [`reads_every_wait_query`] tells which case a session is in). Checked on 15.18, 17.10
/// and 18.4 by `tests/tests/backfill_keyset_real.rs`.
pub fn committed_but_running_query() -> &'static str {
    "SELECT x::text FROM pg_snapshot_xip(pg_current_snapshot()) AS x \
     WHERE pg_xact_status(x) = 'committed' \
     OR x::xid IN (SELECT backend_xid FROM pg_stat_activity \
     WHERE wait_event_type = 'IPC' AND wait_event = 'SyncRep' \
     AND datname = current_database())"
}

/// Whether the session's role sees every backend's wait in `pg_stat_activity` (`true` or
/// `false`): it has the privileges of `pg_read_all_stats` (a superuser does, and so does a
/// member of `pg_monitor`). Without them [`committed_but_running_query`] sees the waits of
/// only the backends whose role's privileges it has (writers logging in as the copier's
/// own role, say), and a commit of any other role waiting for a synchronous standby is not
/// named.
pub fn reads_every_wait_query() -> &'static str {
    "SELECT pg_has_role('pg_read_all_stats', 'USAGE')::text"
}

/// `COPY (SELECT <every column of relation, in its order> FROM heap WHERE (<filter>) AND
/// (<key>) > (<after>) ORDER BY <key> LIMIT limit) TO STDOUT`: the next chunk of a keyset
/// walk in primary-key order, read as [`copy_range`](crate::snapshot::sql::copy_range)
/// reads a range (text format, values as pgoutput renders them, `filter` the
/// publication's row filter as PostgreSQL prints it, `heap` the relation or one of its
/// leaf partitions).
///
/// `key` holds indexes into `relation.columns` in the primary key's column order.
/// `after` is the key of the last row copied, each value as COPY's text format printed it
/// (un-escaped), read back in a session with the same settings; `None` for the first
/// chunk. The values are written as untyped string literals, which PostgreSQL coerces to
/// the key columns' types in the row comparison; the key is always written as a row
/// constructor, which for one column is only a parenthesised value. Index scans on the
/// primary key, `Index Cond: (ROW(k1, k2) > ROW(..))`, no Sort, on 15-18 (§5); the
/// walk is exact for int, int8, text, uuid, timestamptz and numeric keys (checked on
/// 15.18, 17.10 and 18.4 by `tests/tests/backfill_keyset_real.rs`). Key columns of a primary
/// key are never NULL.
///
/// `None` when a name or value cannot be quoted (NUL), `key` is empty or points past the
/// columns, `after` does not have one value per key column, or `limit` is 0 (a walk that
/// could never advance).
pub fn chunk_copy(
    relation: &Relation,
    heap: &QualifiedName,
    key: &[usize],
    filter: Option<&str>,
    after: Option<&[String]>,
    limit: u64,
) -> Option<String> {
    if key.is_empty() || limit == 0 {
        return None;
    }
    let mut columns = Vec::with_capacity(relation.columns.len());
    for column in &relation.columns {
        columns.push(quote_ident(&column.name)?);
    }
    let mut key_columns = Vec::with_capacity(key.len());
    for &index in key {
        key_columns.push(columns.get(index)?.as_str());
    }
    let key_columns = key_columns.join(", ");
    let from = format!(
        "{}.{}",
        quote_ident(&heap.schema)?,
        quote_ident(&heap.table)?
    );
    let mut conditions = Vec::new();
    if let Some(filter) = filter {
        conditions.push(format!("({filter})"));
    }
    if let Some(after) = after {
        if after.len() != key.len() {
            return None;
        }
        let mut values = Vec::with_capacity(after.len());
        for value in after {
            values.push(pg_string(value)?);
        }
        conditions.push(format!("({key_columns}) > ({})", values.join(", ")));
    }
    let mut sql = format!("COPY (SELECT {} FROM {from}", columns.join(", "));
    if !conditions.is_empty() {
        sql.push_str(" WHERE ");
        sql.push_str(&conditions.join(" AND "));
    }
    sql.push_str(&format!(" ORDER BY {key_columns} LIMIT {limit}) TO STDOUT"));
    Some(sql)
}

/// `SELECT pg_logical_emit_message(false, <prefix>, <content>[, true])::text`: writes a
/// watermark into the WAL and answers its LSN (text such as `0/1505728`), the LSN the
/// stream's message carries (§1). Non-transactional: delivered at its own WAL position,
/// outside any transaction, even when emitted inside one (the chunk's READ ONLY one
/// included, §2). `flush` adds PostgreSQL 17's fourth argument (the server is 17 or newer:
/// 15 and 16 have no such overload), which flushes the WAL so the message is decoded at
/// once instead of after the WAL writer's next round, up to ~220 ms later (§6). Any role
/// that can connect may call it, on any `wal_level`; a standby refuses it (XX000, §2).
/// `None` when `prefix` or `content` holds NUL.
pub fn watermark(prefix: &str, content: &str, flush: bool) -> Option<String> {
    let flush = if flush { ", true" } else { "" };
    Some(format!(
        "SELECT pg_logical_emit_message(false, {}, {}{flush})::text",
        pg_string(prefix)?,
        pg_string(content)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pgoutput::{RelationColumn, ReplicaIdentity};

    fn relation(columns: &[&str]) -> Relation {
        Relation {
            oid: 1,
            namespace: "public".into(),
            name: "t".into(),
            replica_identity: ReplicaIdentity::Default,
            columns: columns
                .iter()
                .map(|c| RelationColumn {
                    in_replica_identity: false,
                    name: (*c).into(),
                    type_oid: 25,
                    type_modifier: -1,
                })
                .collect(),
        }
    }

    fn heap(schema: &str, table: &str) -> QualifiedName {
        QualifiedName {
            schema: schema.into(),
            table: table.into(),
        }
    }

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| (*v).to_owned()).collect()
    }

    #[test]
    fn the_first_chunk_has_no_key_condition() {
        let r = relation(&["k1", "v", "k2"]);
        assert_eq!(
            chunk_copy(&r, &heap("public", "t"), &[0, 2], None, None, 1000).as_deref(),
            Some(
                r#"COPY (SELECT "k1", "v", "k2" FROM "public"."t" ORDER BY "k1", "k2" LIMIT 1000) TO STDOUT"#
            )
        );
    }

    #[test]
    fn later_chunks_start_after_the_last_key_in_key_order() {
        let r = relation(&["v", "k2", "k1"]);
        let after = strings(&["7", "x"]);
        assert_eq!(
            chunk_copy(&r, &heap("public", "t"), &[2, 1], None, Some(&after), 10).as_deref(),
            Some(
                r#"COPY (SELECT "v", "k2", "k1" FROM "public"."t" WHERE ("k1", "k2") > ('7', 'x') ORDER BY "k1", "k2" LIMIT 10) TO STDOUT"#
            )
        );
        let one = strings(&["42"]);
        assert_eq!(
            chunk_copy(&r, &heap("public", "t"), &[2], None, Some(&one), 10).as_deref(),
            Some(
                r#"COPY (SELECT "v", "k2", "k1" FROM "public"."t" WHERE ("k1") > ('42') ORDER BY "k1" LIMIT 10) TO STDOUT"#
            )
        );
    }

    #[test]
    fn the_row_filter_and_the_key_condition_are_both_bounded() {
        let r = relation(&["k1", "k2"]);
        let filter = Some("((k1 % 3) <> 0)");
        assert_eq!(
            chunk_copy(&r, &heap("public", "t_1"), &[0, 1], filter, None, 5).as_deref(),
            Some(
                r#"COPY (SELECT "k1", "k2" FROM "public"."t_1" WHERE (((k1 % 3) <> 0)) ORDER BY "k1", "k2" LIMIT 5) TO STDOUT"#
            )
        );
        let after = strings(&["1", "a"]);
        assert_eq!(
            chunk_copy(&r, &heap("public", "t_1"), &[0, 1], filter, Some(&after), 5).as_deref(),
            Some(
                r#"COPY (SELECT "k1", "k2" FROM "public"."t_1" WHERE (((k1 % 3) <> 0)) AND ("k1", "k2") > ('1', 'a') ORDER BY "k1", "k2" LIMIT 5) TO STDOUT"#
            )
        );
    }

    #[test]
    fn names_and_values_are_quoted() {
        let r = relation(&["Odd \"k\"", "v"]);
        let after = strings(&["it's", "back\\slash"]);
        assert_eq!(
            chunk_copy(
                &r,
                &heap("My Schema", "t\"x"),
                &[0, 1],
                None,
                Some(&after),
                3
            )
            .as_deref(),
            Some(
                r#"COPY (SELECT "Odd ""k""", "v" FROM "My Schema"."t""x" WHERE ("Odd ""k""", "v") > ('it''s', E'back\\slash') ORDER BY "Odd ""k""", "v" LIMIT 3) TO STDOUT"#
            )
        );
        let tab = strings(&["a\tb\n"]);
        assert_eq!(
            chunk_copy(&r, &heap("s", "t"), &[1], None, Some(&tab), 3).as_deref(),
            Some("COPY (SELECT \"Odd \"\"k\"\"\", \"v\" FROM \"s\".\"t\" WHERE (\"v\") > ('a\tb\n') ORDER BY \"v\" LIMIT 3) TO STDOUT")
        );
    }

    #[test]
    fn what_cannot_be_written_is_refused() {
        let r = relation(&["k", "v"]);
        let t = heap("public", "t");
        assert_eq!(chunk_copy(&r, &t, &[], None, None, 10), None, "no key");
        assert_eq!(
            chunk_copy(&r, &t, &[2], None, None, 10),
            None,
            "past the columns"
        );
        assert_eq!(chunk_copy(&r, &t, &[0], None, None, 0), None, "limit 0");
        let two = strings(&["1", "2"]);
        assert_eq!(
            chunk_copy(&r, &t, &[0], None, Some(&two), 10),
            None,
            "one value per key column"
        );
        assert_eq!(
            chunk_copy(&r, &t, &[0], None, Some(&strings(&["a\0"])), 10),
            None,
            "NUL in a value"
        );
        assert_eq!(
            chunk_copy(&relation(&["k\0"]), &t, &[0], None, None, 10),
            None
        );
        assert_eq!(
            chunk_copy(&r, &heap("public", "t\0"), &[0], None, None, 10),
            None
        );
        assert_eq!(watermark("wm\0", "x", false), None);
        assert_eq!(watermark("wm", "x\0", false), None);
    }

    #[test]
    fn the_chunk_transaction_reads_its_snapshot_first() {
        assert_eq!(
            chunk_begin(),
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT pg_current_snapshot()::text"
        );
        assert!(chunk_begin().ends_with(snapshot_query()));
        assert_eq!(snapshot_query(), "SELECT pg_current_snapshot()::text");
        assert_eq!(
            committed_but_running_query(),
            "SELECT x::text FROM pg_snapshot_xip(pg_current_snapshot()) AS x \
             WHERE pg_xact_status(x) = 'committed' \
             OR x::xid IN (SELECT backend_xid FROM pg_stat_activity \
             WHERE wait_event_type = 'IPC' AND wait_event = 'SyncRep' \
             AND datname = current_database())"
        );
        assert_eq!(
            reads_every_wait_query(),
            "SELECT pg_has_role('pg_read_all_stats', 'USAGE')::text"
        );
        // The reader sends them joined by "; " in one simple-query string.
        assert!(!committed_but_running_query().contains(';'));
    }

    #[test]
    fn watermarks_are_non_transactional_and_flush_only_when_asked() {
        assert_eq!(
            watermark("slotline", "low 1", false).as_deref(),
            Some("SELECT pg_logical_emit_message(false, 'slotline', 'low 1')::text")
        );
        assert_eq!(
            watermark("slotline", "it's \\ high", true).as_deref(),
            Some(
                r"SELECT pg_logical_emit_message(false, 'slotline', E'it''s \\ high', true)::text"
            )
        );
    }
}
