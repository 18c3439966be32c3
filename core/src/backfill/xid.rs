//! A chunk's MVCC snapshot, as `pg_current_snapshot()` prints it (`xmin:xmax:xip,...`), and
//! which of the stream's transactions it saw.
//!
//! The snapshot speaks 64-bit transaction ids (`xid8`: epoch and xid); pgoutput's Begin
//! carries the 32-bit xid. A 32-bit xid is widened against the snapshot's `xmax` the way
//! PostgreSQL compares xids: modulo 2^32, within 2^31 either side, which holds for every
//! transaction that can still matter to a snapshot (older ones are frozen long before).

use std::collections::BTreeSet;
use std::fmt;

/// A transaction snapshot: every transaction below `xmin` had finished when it was taken,
/// none from `xmax` on had started, and `xip` lists those in between still in progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxSnapshot {
    pub xmin: u64,
    pub xmax: u64,
    /// In progress when the snapshot was taken (each `xmin <= x < xmax`).
    pub xip: BTreeSet<u64>,
}

/// `pg_current_snapshot()` text that is not a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotParseError(pub String);

impl fmt::Display for SnapshotParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a transaction snapshot (expected xmin:xmax:xip,... as pg_current_snapshot() prints it)",
            self.0
        )
    }
}

impl TxSnapshot {
    /// Parses `xmin:xmax:xip1,xip2,...` (the list may be empty), checking the invariants
    /// PostgreSQL keeps: `xmin <= xmax`, every listed xid in `[xmin, xmax)`.
    pub fn parse(text: &str) -> Result<TxSnapshot, SnapshotParseError> {
        let bad = || SnapshotParseError(text.to_owned());
        let mut parts = text.trim().split(':');
        let (Some(xmin), Some(xmax), Some(list), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        let number = |s: &str| s.parse::<u64>().map_err(|_| bad());
        let xmin = number(xmin)?;
        let xmax = number(xmax)?;
        if xmin > xmax {
            return Err(bad());
        }
        let mut xip = BTreeSet::new();
        if !list.is_empty() {
            for x in list.split(',') {
                let x = number(x)?;
                if x < xmin || x >= xmax {
                    return Err(bad());
                }
                xip.insert(x);
            }
        }
        Ok(TxSnapshot { xmin, xmax, xip })
    }

    /// The 64-bit id of a 32-bit xid, taken as the one nearest to `xmax`.
    pub fn widen(&self, xid: u32) -> u64 {
        let delta = i64::from(xid.wrapping_sub(self.xmax as u32) as i32);
        (self.xmax as i64).saturating_add(delta).max(0) as u64
    }

    /// Whether a transaction that committed is visible to this snapshot: it had finished
    /// when the snapshot was taken. (A transaction that aborted is never streamed.)
    pub fn sees(&self, xid: u32) -> bool {
        self.sees_full(self.widen(xid))
    }

    /// [`TxSnapshot::sees`] of a 64-bit id.
    pub fn sees_full(&self, xid: u64) -> bool {
        xid < self.xmin || (xid < self.xmax && !self.xip.contains(&xid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_pg_current_snapshot_prints() {
        let s = TxSnapshot::parse("748:752:748,750").unwrap();
        assert_eq!((s.xmin, s.xmax), (748, 752));
        assert_eq!(s.xip.iter().copied().collect::<Vec<_>>(), vec![748, 750]);
        let empty = TxSnapshot::parse("5605:5605:").unwrap();
        assert!(empty.xip.is_empty());
        for bad in [
            "", "1:2", "1:2:3:4", "3:2:", "1:5:0", "1:5:5", "a:5:", "1:5:2,,3",
        ] {
            let error = TxSnapshot::parse(bad).unwrap_err();
            assert!(error.to_string().contains("xmin:xmax:xip"), "{error}");
        }
    }

    #[test]
    fn a_committed_transaction_is_seen_only_if_it_had_finished() {
        let s = TxSnapshot::parse("748:752:748,750").unwrap();
        assert!(s.sees(700), "below xmin: finished before");
        assert!(!s.sees(748), "in progress");
        assert!(s.sees(749), "between, not listed: finished");
        assert!(!s.sees(750));
        assert!(s.sees(751));
        assert!(!s.sees(752), "from xmax on: started after");
        assert!(!s.sees(9000));
    }

    #[test]
    fn a_32_bit_xid_is_widened_across_the_epoch() {
        // Epoch 1, xmax just past the wrap: xid 4294967290 belongs to epoch 0.
        let xmax = (1u64 << 32) + 5;
        let s = TxSnapshot {
            xmin: xmax - 20,
            xmax,
            xip: [xmax - 10].into(),
        };
        assert_eq!(s.widen(4_294_967_290), (1u64 << 32) - 6);
        assert_eq!(s.widen(3), (1u64 << 32) + 3);
        assert_eq!(s.widen(7), (1u64 << 32) + 7);
        assert!(s.sees(3));
        assert!(!s.sees(7), "started after the snapshot, in the new epoch");
        assert!(!s.sees((xmax - 10) as u32), "listed in progress");
        assert!(s.sees(4_294_967_290), "long finished, last epoch");
    }
}
