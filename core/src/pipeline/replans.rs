//! The guard that keeps re-reading the catalog from becoming a reconnect loop.
//!
//! A change whose relation the session's catalog cannot place (a row of a partition
//! attached after the catalog was read, a TRUNCATE naming only some of a routed table's
//! partitions as that catalog knew them) ends the session, so the next one reads the
//! catalog again and replays the change from the slot: nothing of its transaction was
//! acknowledged. Each change gets that one chance, known by its WAL position, which a
//! replay repeats; met again, it exits (docs/postgres.md, "Partitioned tables").
//!
//! Owns only the memory of which changes had their chance; the Streaming phase decides
//! what cannot be placed.

use crate::Lsn;
use std::collections::BTreeSet;

/// Changes that had their chance and may still be replayed, at most this many: beyond it
/// something keeps changing the catalog faster than the stream can follow, and the change
/// exits like one met twice.
pub(crate) const MAX_REPLANS: usize = 16;

#[derive(Debug, Default)]
pub(crate) struct Replans {
    /// WAL positions of the changes that ended a session to read the catalog again.
    at: BTreeSet<Lsn>,
}

impl Replans {
    /// Whether the change at `at` may end the session for a fresh catalog: only the first
    /// time it is met. Changes before `flush` (acknowledged, never replayed) are forgotten.
    pub(crate) fn first_chance(&mut self, at: Lsn, flush: Lsn) -> bool {
        self.at.retain(|lsn| *lsn >= flush);
        if self.at.contains(&at) || self.at.len() >= MAX_REPLANS {
            return false;
        }
        self.at.insert(at);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_change_gets_one_fresh_catalog() {
        let mut replans = Replans::default();
        assert!(replans.first_chance(Lsn(0x500), Lsn(0x100)));
        assert!(!replans.first_chance(Lsn(0x500), Lsn(0x100)), "the replay");
        assert!(
            replans.first_chance(Lsn(0x600), Lsn(0x100)),
            "another change"
        );
    }

    #[test]
    fn acknowledged_changes_are_forgotten_and_outstanding_ones_are_bounded() {
        let mut replans = Replans::default();
        for i in 0..MAX_REPLANS as u64 {
            assert!(replans.first_chance(Lsn(0x1000 + i), Lsn(0x100)));
        }
        assert!(!replans.first_chance(Lsn(0x9000), Lsn(0x100)), "bounded");
        assert!(
            replans.first_chance(Lsn(0x9000), Lsn(0x2000)),
            "the earlier ones were acknowledged since"
        );
    }
}
