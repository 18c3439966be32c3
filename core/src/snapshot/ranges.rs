//! Which part of which table each snapshot worker copies next.
//!
//! A table is copied in ranges of its heap blocks (`ctid >= '(a,0)' AND ctid < '(b,0)'`,
//! which PostgreSQL answers with a TID range scan), so one large table keeps every worker
//! busy while small tables are copied whole. The ranges of a table partition it exactly:
//! every row visible to the snapshot is in one range, so the rows copied per table are the
//! snapshot's row count. The last range of a table is open-ended, because the table's size is
//! measured after the snapshot was taken and rows the snapshot sees never live past it, but
//! a range must never cut them off if the measurement is stale.
//!
//! Owns only the arithmetic; never builds SQL (see `snapshot::sql`) nor hands work out.

/// The size of one heap of a routed table (the table's own, or a leaf partition's) as
/// PostgreSQL measured it under the snapshot.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TableSize {
    pub route: usize,
    /// Which heap of the copy (an index the caller keeps).
    pub heap: usize,
    /// Heap blocks (`pg_relation_size / block_size`).
    pub blocks: u64,
    /// `pg_class.reltuples`: an estimate, `None` when never analyzed.
    pub estimated_rows: Option<u64>,
}

/// A range of heap blocks; `end` is exclusive, `None` means "to the end of the table".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct BlockRange {
    pub start: u64,
    pub end: Option<u64>,
}

impl BlockRange {
    pub const WHOLE: BlockRange = BlockRange {
        start: 0,
        end: None,
    };

    pub fn is_whole(&self) -> bool {
        *self == BlockRange::WHOLE
    }
}

/// One unit of copying: a range of one heap of one route's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkItem {
    pub route: usize,
    pub heap: usize,
    pub range: BlockRange,
}

/// The smallest range worth its own COPY: 8 MiB of 8 KiB blocks. Smaller tables are copied
/// whole.
pub const MIN_RANGE_BLOCKS: u64 = 1024;

/// How many ranges per worker the largest tables are cut into, so that workers finishing
/// early find more work instead of idling behind one long range.
pub const RANGES_PER_WORKER: u64 = 4;

/// Plans the work: every heap (a table, or a leaf partition: each is copied like a table
/// of its own) cut into ranges of about `total / (workers *
/// RANGES_PER_WORKER)` blocks (never below [`MIN_RANGE_BLOCKS`]), largest tables first so
/// the longest copies start earliest. A table of zero or few blocks is one whole range.
pub fn plan_ranges(tables: &[TableSize], workers: usize) -> Vec<WorkItem> {
    let workers = workers.max(1) as u64;
    let total: u64 = tables.iter().map(|t| t.blocks).sum();
    let target = (total / (workers * RANGES_PER_WORKER)).max(MIN_RANGE_BLOCKS);
    let mut order: Vec<&TableSize> = tables.iter().collect();
    order.sort_by(|a, b| b.blocks.cmp(&a.blocks).then(a.heap.cmp(&b.heap)));
    let mut items = Vec::new();
    for table in order {
        let pieces = table.blocks.div_ceil(target).max(1);
        if pieces == 1 {
            items.push(WorkItem {
                route: table.route,
                heap: table.heap,
                range: BlockRange::WHOLE,
            });
            continue;
        }
        let step = table.blocks.div_ceil(pieces);
        for piece in 0..pieces {
            let start = piece * step;
            let end = (piece + 1 < pieces).then_some((piece + 1) * step);
            items.push(WorkItem {
                route: table.route,
                heap: table.heap,
                range: BlockRange { start, end },
            });
        }
    }
    items
}

/// How many workers to open: never more than the work.
pub fn worker_count(configured: usize, items: usize) -> usize {
    configured.clamp(1, items.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn size(route: usize, blocks: u64) -> TableSize {
        TableSize {
            route,
            heap: route,
            blocks,
            estimated_rows: None,
        }
    }

    #[test]
    fn small_tables_are_copied_whole_largest_first() {
        let items = plan_ranges(&[size(0, 10), size(1, 500), size(2, 0)], 4);
        assert_eq!(
            items,
            [1, 0, 2].map(|route| WorkItem {
                route,
                heap: route,
                range: BlockRange::WHOLE
            })
        );
    }

    #[test]
    fn one_large_table_is_cut_so_every_worker_has_work_and_the_last_range_is_open() {
        let items = plan_ranges(&[size(0, 100_000), size(1, 20)], 4);
        let big: Vec<BlockRange> = items
            .iter()
            .filter(|i| i.route == 0)
            .map(|i| i.range)
            .collect();
        assert_eq!(big.len(), 16, "4 ranges per worker");
        assert_eq!(big[0].start, 0);
        assert_eq!(big.last().and_then(|r| r.end), None, "open-ended tail");
        for pair in big.windows(2) {
            assert_eq!(pair[0].end, Some(pair[1].start), "contiguous, no gap");
        }
        assert_eq!(items.last().map(|i| i.route), Some(1));
    }

    #[test]
    fn the_leaves_of_a_partitioned_table_are_cut_and_shared_like_tables() {
        // Route 0 is partitioned into three leaves of unequal size; route 1 is a table.
        let sizes =
            [(0, 0, 60_000), (0, 1, 3_000), (0, 2, 0), (1, 3, 500)].map(|(route, heap, blocks)| {
                TableSize {
                    route,
                    heap,
                    blocks,
                    estimated_rows: None,
                }
            });
        let items = plan_ranges(&sizes, 4);
        let heaps: Vec<(usize, usize)> = items.iter().map(|i| (i.route, i.heap)).collect();
        assert_eq!(
            heaps.iter().filter(|(_, heap)| *heap == 0).count(),
            16,
            "the largest leaf is cut so every worker has work"
        );
        assert_eq!(
            &heaps[16..],
            [(0, 1), (1, 3), (0, 2)],
            "the smaller leaves are copied whole, largest first"
        );
    }

    #[test]
    fn workers_never_exceed_the_work() {
        assert_eq!(worker_count(4, 2), 2);
        assert_eq!(worker_count(4, 0), 1);
        assert_eq!(worker_count(1, 40), 1);
    }

    proptest! {
        /// Every block of every table is in exactly one range of that table.
        #[test]
        fn ranges_partition_every_table(
            blocks in proptest::collection::vec(0u64..200_000, 1..6),
            workers in 1usize..9,
        ) {
            let tables: Vec<TableSize> =
                blocks.iter().enumerate().map(|(r, b)| size(r, *b)).collect();
            let items = plan_ranges(&tables, workers);
            for table in &tables {
                let mut ranges: Vec<BlockRange> = items
                    .iter()
                    .filter(|i| i.heap == table.heap)
                    .map(|i| i.range)
                    .collect();
                ranges.sort();
                prop_assert!(!ranges.is_empty());
                prop_assert_eq!(ranges[0].start, 0);
                prop_assert_eq!(ranges.last().unwrap().end, None);
                for pair in ranges.windows(2) {
                    prop_assert_eq!(pair[0].end, Some(pair[1].start));
                    prop_assert!(pair[0].start < pair[1].start);
                }
            }
        }
    }
}
