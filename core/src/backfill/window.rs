//! Which rows of a chunk may be emitted at its high watermark (docs/online-copy.md,
//! "Reconciling a chunk with the stream").
//!
//! A chunk is read under its own snapshot while the stream goes on; its rows are emitted
//! when the stream reaches the chunk's high watermark, in stream order. A row is stale if a
//! transaction the stream delivers before that point changed its key and the chunk's
//! snapshot did not see that transaction: Feldera already holds the newer value (or its
//! delete), and the chunk's older one would overwrite it. Those keys are dropped from the
//! chunk; every other row is what the table held for that key as of the watermark, because
//! every transaction the snapshot saw committed before it.
//!
//! On a primary "did not see" is read off the snapshot (`pg_current_snapshot()`): this
//! catches the transactions whose commit record the stream carries *before* the chunk was
//! read but which were not yet visible to it (a commit waiting for a synchronous standby,
//! or in the microseconds between its WAL record and its end; docs/online-copy-facts.md
//! §3), which a rule on WAL positions alone misses. A hot standby's snapshot does not list
//! its running transactions, but there visibility follows replay in WAL order, so its rule
//! is by position: every commit that ends between the replay positions read around the
//! chunk is dropped ([`Retained::close_by_positions`]).
//!
//! The stream's transactions are kept from when the copy of a table begins (or the previous
//! chunk closed) on. One older than that which the snapshot listed as running and whose
//! commit is written since is reported by the chunk's question
//! (`keyset::committed_but_running_query`): its keys are unknown, so the chunk is read again
//! later ([`Verdict::Retry`]), and again for as long as the transaction stays invisible (a
//! copy begun during a wait for a synchronous standby waits for the standby too). The
//! question names a transaction that has left the proc array committed (`pg_xact_status`)
//! and one whose commit is written but which still waits for a synchronous standby (its
//! backend in `pg_stat_activity`, waiting on `SyncRep`), the second only when the copier's
//! role may see that backend's wait (the privileges of `pg_read_all_stats`, or of the
//! writer's role). Without them, one older than the record and still waiting when the chunk
//! finishes is not found and the chunk's row of its key is stale (docs/online-copy.md names
//! what is left). Transactions the last snapshot did not see are kept for the next chunk, so
//! one the stream delivered after the copy began is never taken for an older one.

use super::xid::TxSnapshot;
use crate::Lsn;
use std::collections::BTreeSet;

/// What one change of the copied table touched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Touch<K> {
    /// This key (an update that changed the key touches the old and the new one).
    Key(K),
    /// Every row: a TRUNCATE.
    Truncate,
    /// A row whose key the change does not carry (`key::touches`).
    UnknownKey,
}

/// A transaction of the stream that changed the table being copied.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Changed<K> {
    xid: u32,
    /// Its Commit's `end_lsn`.
    end: Lsn,
    keys: BTreeSet<K>,
    truncated: bool,
    unknown_key: bool,
}

impl<K: Ord> Changed<K> {
    /// Whether a chunk row of `key` is stale if this transaction is not in the chunk.
    fn stales(&self, key: &K) -> bool {
        self.truncated || self.keys.contains(key)
    }
}

/// What one chunk read returned: its rows by key, the snapshot it was read under, and the
/// transactions running for that snapshot whose commit was written by the time the chunk's
/// question was asked (in the same transaction, after the rows;
/// `keyset::committed_but_running_query`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkRead<K, R> {
    pub rows: Vec<(K, R)>,
    pub snapshot: TxSnapshot,
    pub committed_in_progress: BTreeSet<u64>,
}

/// What to do with a chunk at its high watermark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict<K, R> {
    /// Emit these rows now, in key order; `dropped` keys were left to the stream.
    Emit { rows: Vec<(K, R)>, dropped: usize },
    /// The chunk cannot be judged: a transaction committed before the stream's record of it
    /// began is still not visible, or a transaction the chunk may not hold changed a row
    /// whose key it did not carry (these xids). Emit nothing; read the chunk again once
    /// they are visible.
    Retry { xids: Vec<u64> },
}

/// The stream's transactions a copy of one table needs to judge its next chunk.
#[derive(Clone, Debug)]
pub struct Retained<K> {
    changed: Vec<Changed<K>>,
    /// Every transaction read since the last close (any table): how a committed-but-running
    /// xid is known to have been seen.
    seen: BTreeSet<u32>,
    /// The `xmax` of the first chunk's snapshot: every xid at or above it was assigned after
    /// this record began, so its commit is in the record if the stream carries it at all.
    /// Such an xid missing from the record wrote nothing the stream publishes (only
    /// unpublished tables): it does not make a chunk be read again.
    began_before: Option<u64>,
}

impl<K: Ord + Clone> Default for Retained<K> {
    fn default() -> Self {
        Retained::new()
    }
}

impl<K: Ord + Clone> Retained<K> {
    /// Begins keeping the stream's transactions: created when a table's copy begins, before
    /// its first chunk is read.
    pub fn new() -> Retained<K> {
        Retained {
            changed: Vec::new(),
            seen: BTreeSet::new(),
            began_before: None,
        }
    }

    /// A transaction committed in the stream, ending at `end`, with what its changes of
    /// the copied table touched (possibly nothing).
    pub fn on_commit(&mut self, xid: u32, end: Lsn, touches: impl IntoIterator<Item = Touch<K>>) {
        self.seen.insert(xid);
        let mut changed = Changed {
            xid,
            end,
            keys: BTreeSet::new(),
            truncated: false,
            unknown_key: false,
        };
        for touch in touches {
            match touch {
                Touch::Key(key) => {
                    changed.keys.insert(key);
                }
                Touch::Truncate => changed.truncated = true,
                Touch::UnknownKey => changed.unknown_key = true,
            }
        }
        if changed.truncated || changed.unknown_key || !changed.keys.is_empty() {
            self.changed.push(changed);
        }
    }

    /// Transactions kept that changed the table.
    pub fn len(&self) -> usize {
        self.changed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.changed.is_empty()
    }

    /// The stream reached the chunk's high watermark (a primary): the rows to emit, judged
    /// by the chunk's snapshot. Afterwards only the transactions that snapshot did not see
    /// are kept.
    pub fn close_by_snapshot<R>(&mut self, read: ChunkRead<K, R>) -> Verdict<K, R> {
        let snapshot = &read.snapshot;
        let began_before = *self.began_before.get_or_insert(snapshot.xmax);
        let seen: BTreeSet<u64> = self.seen.iter().map(|&x| snapshot.widen(x)).collect();
        let mut unknown: Vec<u64> = read
            .committed_in_progress
            .iter()
            .copied()
            .filter(|x| !seen.contains(x) && *x < began_before)
            .collect();
        let unseen: Vec<&Changed<K>> = self
            .changed
            .iter()
            .filter(|c| !snapshot.sees(c.xid))
            .collect();
        unknown.extend(
            unseen
                .iter()
                .filter(|c| c.unknown_key)
                .map(|c| snapshot.widen(c.xid)),
        );
        let verdict = if unknown.is_empty() {
            emit(read.rows, |k| unseen.iter().any(|c| c.stales(k)))
        } else {
            unknown.sort_unstable();
            unknown.dedup();
            Verdict::Retry { xids: unknown }
        };
        self.changed.retain(|c| !snapshot.sees(c.xid));
        self.seen.retain(|&x| !snapshot.sees(x));
        verdict
    }

    /// The stream reached `after_read` (a hot standby): the chunk was read at a replay
    /// position between `before_read` and `after_read`, so every commit ending in between
    /// may or may not be in it and its keys are dropped; one ending at or before
    /// `before_read` is in it. Afterwards nothing is kept.
    pub fn close_by_positions<R>(
        &mut self,
        rows: Vec<(K, R)>,
        before_read: Lsn,
        after_read: Lsn,
    ) -> Verdict<K, R> {
        let between: Vec<&Changed<K>> = self
            .changed
            .iter()
            .filter(|c| c.end > before_read && c.end <= after_read)
            .collect();
        let unknown: Vec<u64> = between
            .iter()
            .filter(|c| c.unknown_key)
            .map(|c| u64::from(c.xid))
            .collect();
        let verdict = if unknown.is_empty() {
            emit(rows, |k| between.iter().any(|c| c.stales(k)))
        } else {
            Verdict::Retry { xids: unknown }
        };
        self.changed.retain(|c| c.end > after_read);
        self.seen = self.changed.iter().map(|c| c.xid).collect();
        verdict
    }
}

fn emit<K, R>(rows: Vec<(K, R)>, stale: impl Fn(&K) -> bool) -> Verdict<K, R> {
    let before = rows.len();
    let rows: Vec<(K, R)> = rows.into_iter().filter(|(k, _)| !stale(k)).collect();
    Verdict::Emit {
        dropped: before - rows.len(),
        rows,
    }
}

#[cfg(test)]
#[path = "window_tests.rs"]
mod tests;
