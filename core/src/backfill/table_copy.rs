//! One table's online copy as the stream sees it: what each streamed message means for the
//! chunk waiting for its high watermark, and when that chunk's rows are to be emitted
//! (docs/online-copy.md, "Reconciling a chunk with the stream"). Ties [`Reader`]'s chunks to
//! [`Retained`]'s record of the stream; owns no connection and no batch.
//!
//! The caller feeds every message of the stream in order (the table's own changes and
//! everyone else's transactions), hands over each chunk its reader produced, and puts an
//! [`Emission`] into the stream where it is returned: at the watermark message on a primary,
//! before the transaction that begins past the read on a standby.

use super::chunk::{Chunk, Judge, WATERMARK_PREFIX};
use super::key::{touches, KeyColumns, RowKey};
use super::window::{ChunkRead, Retained, Touch, Verdict};
use crate::pgoutput::{LogicalMessage, Message, Relation};
use crate::Lsn;
use bytes::Bytes;
use std::collections::{BTreeMap, VecDeque};

/// What the stream must do at the point a chunk is judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Emission {
    /// Emit these COPY lines (in key order) here, as a transaction committed at `at`; the
    /// table's copy has then reached `end_key` (`last`: the whole table).
    Rows {
        number: u64,
        rows: Vec<(RowKey, Bytes)>,
        dropped: usize,
        at: Lsn,
        end_key: Option<Vec<String>>,
        last: bool,
    },
    /// Nothing is emitted: read chunk `number` again from `after` (these transactions
    /// stood in the way).
    Reread {
        number: u64,
        after: Option<Vec<String>>,
        xids: Vec<u64>,
    },
}

/// One table being copied online.
#[derive(Debug)]
pub struct TableCopy {
    key: KeyColumns,
    /// The key's positions in each relation of the table the stream announced (the table,
    /// or one of its partitions), by OID; `None`: a relation whose columns lack the key.
    positions: BTreeMap<u32, Option<Vec<usize>>>,
    retained: Retained<RowKey>,
    /// The open transaction's xid and what it touched of the table.
    open: Option<(u32, Vec<Touch<RowKey>>)>,
    /// The chunks read and waiting for the stream to reach their high watermarks, oldest
    /// first (their watermarks are in the WAL in this order: one connection reads and marks
    /// them one after the other).
    pending: VecDeque<Chunk>,
}

impl TableCopy {
    /// Starts keeping the stream's record for a table whose key is `key`: before its first
    /// chunk is read.
    pub fn new(key: KeyColumns) -> TableCopy {
        TableCopy {
            key,
            positions: BTreeMap::new(),
            retained: Retained::new(),
            open: None,
            pending: VecDeque::new(),
        }
    }

    /// How many chunks wait for their high watermarks.
    pub fn waiting(&self) -> usize {
        self.pending.len()
    }

    /// Forgets every chunk that waits (the chunk before them is read again, so theirs are
    /// read again too).
    pub fn discard_waiting(&mut self) {
        self.pending.clear();
    }

    /// Transactions kept for judging chunks.
    pub fn retained(&self) -> usize {
        self.retained.len()
    }

    /// A relation of this table (the table or a partition of it) was announced.
    pub fn on_relation(&mut self, relation: &Relation) {
        self.positions
            .insert(relation.oid, self.key.positions(&relation.columns));
    }

    /// A chunk was read: it waits for the stream to reach its high watermark. On a standby
    /// the stream may be past it already (`read_at`: where the stream stands), and it is
    /// judged at once.
    pub fn on_chunk(&mut self, chunk: Chunk, read_at: Lsn) -> Option<Emission> {
        self.pending.push_back(chunk);
        self.on_position(read_at)
    }

    /// A Begin: `final_lsn` is where its commit record starts. On a standby, a transaction
    /// whose commit lies past the chunk's read is not in it: the chunk is judged before it.
    pub fn on_begin(&mut self, xid: u32, final_lsn: Lsn) -> Option<Emission> {
        let emission = match self.pending.front() {
            Some(Chunk {
                judge: Judge::Positions { after_read, .. },
                ..
            }) if final_lsn >= *after_read => self.judge(final_lsn),
            _ => None,
        };
        self.open = Some((xid, Vec::new()));
        emission
    }

    /// A change of a relation of this table, inside the open transaction.
    pub fn on_change(&mut self, message: &Message<'_>) {
        let oid = message.row_relation_oid().unwrap_or_default();
        let Some((_, touched)) = self.open.as_mut() else {
            return;
        };
        match self.positions.get(&oid) {
            Some(Some(positions)) => touched.extend(touches(message, positions)),
            // Announced without the key columns, or not announced: which row changed is
            // unknown.
            _ => touched.push(Touch::UnknownKey),
        }
    }

    /// A TRUNCATE of this table in the open transaction.
    pub fn on_truncate(&mut self) {
        if let Some((_, touched)) = self.open.as_mut() {
            touched.push(Touch::Truncate);
        }
    }

    /// The open transaction committed, ending at `end_lsn`.
    pub fn on_commit(&mut self, end_lsn: Lsn) -> Option<Emission> {
        if let Some((xid, touched)) = self.open.take() {
            self.retained.on_commit(xid, end_lsn, touched);
        }
        self.on_position(end_lsn)
    }

    /// A logical message: the pending chunk's high watermark judges it (a primary).
    pub fn on_message(&mut self, message: &LogicalMessage<'_>) -> Option<Emission> {
        if message.transactional || message.prefix != WATERMARK_PREFIX {
            return None;
        }
        match self.pending.front() {
            Some(Chunk {
                judge: Judge::Snapshot { content, .. },
                ..
            }) if content.as_bytes() == message.content => self.judge(message.lsn),
            _ => None,
        }
    }

    /// The stream stands at `lsn` (a commit's end, a keepalive's WAL end): a standby's
    /// chunk read before it is judged.
    pub fn on_position(&mut self, lsn: Lsn) -> Option<Emission> {
        match self.pending.front() {
            Some(Chunk {
                judge: Judge::Positions { after_read, .. },
                ..
            }) if lsn >= *after_read => self.judge(lsn),
            _ => None,
        }
    }

    /// Judges the waiting chunk at `at`, where the stream stands between two transactions:
    /// for a chunk whose watermark the stream passed before the chunk's answer came (every
    /// transaction streamed since the copy began is in the record, those after the
    /// watermark too, and none of those was seen by the chunk's snapshot).
    pub fn judge_now(&mut self, at: Lsn) -> Option<Emission> {
        self.judge(at)
    }

    /// Whether the oldest waiting chunk's watermark is at or before `read`, where the stream
    /// stands: the stream passed it before the chunk's answer came (`judge_now`).
    pub fn passed(&self, read: Lsn) -> bool {
        matches!(
            self.pending.front(),
            Some(Chunk { judge: Judge::Snapshot { high, .. }, .. }) if *high <= read
        )
    }

    fn judge(&mut self, at: Lsn) -> Option<Emission> {
        let chunk = self.pending.pop_front()?;
        let end_key = chunk.end_key();
        let verdict = match chunk.judge {
            Judge::Snapshot {
                snapshot,
                committed_in_progress,
                ..
            } => self.retained.close_by_snapshot(ChunkRead {
                rows: chunk.rows,
                snapshot,
                committed_in_progress,
            }),
            Judge::Positions {
                before_read,
                after_read,
            } => self
                .retained
                .close_by_positions(chunk.rows, before_read, after_read),
        };
        Some(match verdict {
            Verdict::Emit { rows, dropped } => Emission::Rows {
                number: chunk.number,
                rows,
                dropped,
                at,
                end_key,
                last: chunk.last,
            },
            Verdict::Retry { xids } => Emission::Reread {
                number: chunk.number,
                after: chunk.after,
                xids,
            },
        })
    }
}

#[cfg(test)]
#[path = "table_copy_tests.rs"]
mod tests;
