//! Partitioned tables: which route the rows of each partition belong to, and what a
//! TRUNCATE of some of a routed table's partitions means for its Feldera table.
//!
//! The user routes a partitioned table by its own name; its partitions are never routed.
//! With `publish_via_partition_root = false` (PostgreSQL's default) pgoutput sends a
//! partition's rows under the partition's own Relation message, so every partition below a
//! routed table, at any depth, is placed on that table's route by OID, as the startup catalog
//! found it (`catalog::questions::partitions_query`). With `true` the rows arrive under the
//! routed table itself and the partitions' Relation messages are only announcements.
//! See docs/postgres.md, "Partitioned tables".
//!
//! Owns the placement and the truncate arithmetic; never reads a message nor decides what
//! an unplaced row means for the session (the Streaming phase does).

use super::routes::PgTable;
use crate::pgoutput::Relation;
use std::collections::{BTreeMap, BTreeSet};

/// A partition of a routed partitioned table, at any depth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// Its shape as a Relation message of its own would describe it (its columns may be in
    /// another order than the root's, or have dropped columns between them).
    pub relation: Relation,
    /// A leaf holds rows; a partition that is itself partitioned holds none.
    pub leaf: bool,
    /// The OID of the partitioned table it is a partition of.
    pub parent: u32,
}

/// One partition of a routed table.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Placed {
    route: usize,
    name: PgTable,
    leaf: bool,
    /// The OID of the partitioned table it is a partition of (a partition or the root).
    parent: u32,
}

/// Every partition of every routed table, by OID.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    partitions: BTreeMap<u32, Placed>,
    /// The leaves of each partitioned route (a route that is not partitioned has none).
    leaves: BTreeMap<usize, BTreeSet<u32>>,
    /// Leaves a route had that the catalog no longer shows (detached or dropped since),
    /// as the state file recorded them: changes of them still in the slot arrive under
    /// their OIDs. Never one the catalog places.
    recorded: BTreeMap<u32, (usize, PgTable)>,
}

/// What a TRUNCATE did to one route's table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TruncateScope {
    /// The table is empty: it was truncated, or every one of its leaves was.
    Whole,
    /// Some leaves were truncated and others keep their rows.
    Partial {
        truncated: Vec<PgTable>,
        kept: Vec<PgTable>,
    },
}

impl Placement {
    /// The placement of `partitions[i]`, the partitions of route `i`.
    pub fn new(partitions: &[Vec<Partition>]) -> Placement {
        let mut placement = Placement::default();
        for (route, list) in partitions.iter().enumerate() {
            for partition in list {
                let relation = &partition.relation;
                placement.partitions.insert(
                    relation.oid,
                    Placed {
                        route,
                        name: PgTable {
                            schema: relation.namespace.clone(),
                            name: relation.name.clone(),
                        },
                        leaf: partition.leaf,
                        parent: partition.parent,
                    },
                );
                if partition.leaf {
                    placement
                        .leaves
                        .entry(route)
                        .or_default()
                        .insert(relation.oid);
                }
            }
        }
        placement
    }

    /// Adds the leaves the state file recorded for each route (`(oid, route, name)`):
    /// each one the catalog does not place is placed on its recorded route. The catalog's
    /// placement wins for a leaf it shows (attached elsewhere since).
    pub fn recall(&mut self, recorded: impl IntoIterator<Item = (u32, usize, PgTable)>) {
        for (oid, route, name) in recorded {
            if !self.partitions.contains_key(&oid) {
                self.recorded.insert(oid, (route, name));
            }
        }
    }

    /// The leaves of every route as the catalog shows them: `(route, oid, name)`.
    pub fn leaves(&self) -> Vec<(usize, u32, PgTable)> {
        self.leaves
            .iter()
            .flat_map(|(route, oids)| {
                oids.iter().filter_map(|oid| {
                    self.partitions
                        .get(oid)
                        .map(|p| (*route, *oid, p.name.clone()))
                })
            })
            .collect()
    }

    /// The route of partition `oid`, when it is a partition of a routed table, or was a
    /// leaf of one as the state file recorded it (`recall`).
    pub fn route_of(&self, oid: u32) -> Option<usize> {
        self.partitions
            .get(&oid)
            .map(|p| p.route)
            .or_else(|| self.recorded.get(&oid).map(|(route, _)| *route))
    }

    /// Whether route `route`'s table has partitions.
    pub fn is_partitioned(&self, route: usize) -> bool {
        self.partitions.values().any(|p| p.route == route)
    }

    /// What truncating `truncated` (OIDs of route `route`'s table or of its partitions, as a
    /// Truncate message lists them) did to the route's table. A truncated partitioned
    /// partition truncates every leaf below it; the table itself, or an OID this placement
    /// does not know as a partition, truncates everything.
    pub fn scope(&self, route: usize, truncated: &BTreeSet<u32>) -> TruncateScope {
        if truncated.iter().any(|oid| self.recorded.contains_key(oid)) {
            // A leaf since detached or dropped: the other leaves keep their rows.
            let mut kept: Vec<PgTable> = self
                .leaves
                .get(&route)
                .into_iter()
                .flatten()
                .filter(|leaf| !self.below_any(**leaf, truncated))
                .filter_map(|oid| self.partitions.get(oid).map(|p| p.name.clone()))
                .collect();
            if kept.is_empty() {
                return TruncateScope::Whole;
            }
            kept.sort();
            let mut truncated: Vec<PgTable> = truncated
                .iter()
                .filter_map(|oid| {
                    self.partitions
                        .get(oid)
                        .map(|p| p.name.clone())
                        .or_else(|| self.recorded.get(oid).map(|(_, name)| name.clone()))
                })
                .collect();
            truncated.sort();
            return TruncateScope::Partial { truncated, kept };
        }
        if truncated
            .iter()
            .any(|oid| !self.partitions.contains_key(oid))
        {
            return TruncateScope::Whole;
        }
        let Some(leaves) = self.leaves.get(&route) else {
            return TruncateScope::Whole;
        };
        let (gone, kept): (Vec<u32>, Vec<u32>) = leaves
            .iter()
            .partition(|leaf| self.below_any(**leaf, truncated));
        if kept.is_empty() {
            return TruncateScope::Whole;
        }
        let names = |oids: &[u32]| {
            let mut names: Vec<PgTable> = oids
                .iter()
                .filter_map(|oid| self.partitions.get(oid).map(|p| p.name.clone()))
                .collect();
            names.sort();
            names
        };
        TruncateScope::Partial {
            truncated: names(&gone),
            kept: names(&kept),
        }
    }

    /// Whether `leaf` or a partitioned table between it and its route's table is in `set`.
    fn below_any(&self, leaf: u32, set: &BTreeSet<u32>) -> bool {
        let mut at = leaf;
        // A partition tree is at most as deep as it has partitions.
        for _ in 0..=self.partitions.len() {
            if set.contains(&at) {
                return true;
            }
            match self.partitions.get(&at) {
                Some(placed) => at = placed.parent,
                None => return false,
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pgoutput::{Relation, ReplicaIdentity};

    const ROOT: u32 = 100;

    fn partition(oid: u32, name: &str, leaf: bool, parent: u32) -> Partition {
        Partition {
            relation: Relation {
                oid,
                namespace: "public".into(),
                name: name.into(),
                replica_identity: ReplicaIdentity::Default,
                columns: Vec::new(),
            },
            leaf,
            parent,
        }
    }

    /// metrics (100): metrics_2024 (101, partitioned by month: 111, 112), metrics_2025
    /// (102), metrics_default (103); route 1 is a table without partitions.
    fn metrics() -> Placement {
        Placement::new(&[
            vec![
                partition(101, "metrics_2024", false, ROOT),
                partition(111, "metrics_2024_01", true, 101),
                partition(112, "metrics_2024_02", true, 101),
                partition(102, "metrics_2025", true, ROOT),
                partition(103, "metrics_default", true, ROOT),
            ],
            Vec::new(),
        ])
    }

    fn set(oids: &[u32]) -> BTreeSet<u32> {
        oids.iter().copied().collect()
    }

    fn names(list: &[&str]) -> Vec<PgTable> {
        list.iter()
            .map(|n| PgTable {
                schema: "public".into(),
                name: (*n).into(),
            })
            .collect()
    }

    #[test]
    fn partitions_at_every_depth_are_placed_on_their_tables_route() {
        let placement = metrics();
        for oid in [101, 111, 112, 102, 103] {
            assert_eq!(placement.route_of(oid), Some(0), "partition {oid}");
        }
        assert_eq!(
            placement.route_of(ROOT),
            None,
            "the routed table goes by name"
        );
        assert_eq!(placement.route_of(999), None);
        assert!(placement.is_partitioned(0) && !placement.is_partitioned(1));
    }

    #[test]
    fn truncating_every_leaf_or_the_table_empties_it() {
        let placement = metrics();
        assert_eq!(placement.scope(0, &set(&[ROOT])), TruncateScope::Whole);
        assert_eq!(
            placement.scope(0, &set(&[111, 112, 102, 103])),
            TruncateScope::Whole,
            "TRUNCATE of the table under publish_via_partition_root = false lists its leaves"
        );
        assert_eq!(
            placement.scope(0, &set(&[101, 102, 103])),
            TruncateScope::Whole,
            "a truncated partitioned partition covers its leaves"
        );
        assert_eq!(placement.scope(1, &set(&[7])), TruncateScope::Whole);
    }

    #[test]
    fn truncating_some_leaves_is_partial_and_names_both_sides() {
        let placement = metrics();
        assert_eq!(
            placement.scope(0, &set(&[102])),
            TruncateScope::Partial {
                truncated: names(&["metrics_2025"]),
                kept: names(&["metrics_2024_01", "metrics_2024_02", "metrics_default"]),
            }
        );
        assert_eq!(
            placement.scope(0, &set(&[101])),
            TruncateScope::Partial {
                truncated: names(&["metrics_2024_01", "metrics_2024_02"]),
                kept: names(&["metrics_2025", "metrics_default"]),
            }
        );
    }

    fn recorded(oid: u32, route: usize, name: &str) -> (u32, usize, PgTable) {
        (oid, route, names(&[name]).remove(0))
    }

    #[test]
    fn a_recorded_leaf_the_catalog_no_longer_shows_is_placed_on_its_route() {
        let mut placement = metrics();
        assert_eq!(placement.route_of(120), None);
        placement.recall([
            recorded(120, 0, "metrics_2023"),
            // Attached to route 1 since: the catalog's placement wins.
            recorded(102, 1, "metrics_2025"),
        ]);
        assert_eq!(placement.route_of(120), Some(0));
        assert_eq!(placement.route_of(102), Some(0));
        assert_eq!(
            placement.leaves().len(),
            4,
            "only the catalog's leaves are listed"
        );
        assert_eq!(
            placement.scope(0, &set(&[120])),
            TruncateScope::Partial {
                truncated: names(&["metrics_2023"]),
                kept: names(&[
                    "metrics_2024_01",
                    "metrics_2024_02",
                    "metrics_2025",
                    "metrics_default"
                ]),
            },
            "a TRUNCATE of a leaf gone since leaves the others' rows"
        );
        assert_eq!(placement.scope(0, &set(&[120, ROOT])), TruncateScope::Whole);
    }
}
