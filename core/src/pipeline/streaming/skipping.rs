//! The changes the stream skips because the routes they belong to are not the slot's to
//! deliver: a route added to a running deployment was copied under its own temporary
//! slot's snapshot, so its transactions committed before that snapshot's consistent point
//! are in the copy already; a removed route's changes the slot still carries (committed
//! before it left the publication) go nowhere. docs/snapshot.md, "Adding and removing
//! tables".
//!
//! Owns the rule (`Skips`), built from the state file; the Streaming phase asks it at
//! each Begin, Relation and TRUNCATE.

use crate::contract::routes::{PgTable, Route};
use crate::snapshot::state::{RoutePhase, StateFile};
use crate::Lsn;

/// What the stream skips, per route (by route index) and per removed source.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Skips {
    /// Each route's own copy's consistent point, for a route copied apart from the others.
    copied_at: Vec<Option<Lsn>>,
    /// The sources of removed routes, as `PgTable` prints them, with their tables' OIDs
    /// where the state file recorded them.
    removed: Vec<(String, Option<u32>)>,
    /// The recorded leaves of removed routes' tables, by OID.
    removed_leaves: Vec<u32>,
}

impl Skips {
    /// The skips a state file records for the configured routes.
    pub(crate) fn of(state: &StateFile, routes: &[Route]) -> Skips {
        let copied_at = routes
            .iter()
            .map(|route| {
                let (source, target) = (route.source.to_string(), route.destination.to_string());
                state
                    .routes
                    .iter()
                    .find(|r| r.source == source && r.target == target)
                    .filter(|r| r.phase == Some(RoutePhase::Complete))
                    .and_then(|r| r.consistent_point)
            })
            .collect();
        let removed_routes: Vec<_> = state
            .routes
            .iter()
            .filter(|r| r.phase == Some(RoutePhase::Removed))
            .filter(|r| {
                !routes
                    .iter()
                    .any(|route| route.source.to_string() == r.source)
            })
            .collect();
        let removed = removed_routes
            .iter()
            .map(|r| (r.source.clone(), r.oid))
            .collect();
        let removed_leaves = removed_routes
            .iter()
            .flat_map(|r| r.leaves.iter().map(|leaf| leaf.oid))
            .collect();
        Skips {
            copied_at,
            removed,
            removed_leaves,
        }
    }

    /// The routes whose changes in a transaction whose commit record is at `final_lsn`
    /// are already in their own copy. The copy under a slot's exported snapshot holds
    /// every transaction whose commit record lies before the slot's consistent point, and
    /// the slot itself would stream every other one (docs/postgres.md, "Connections").
    pub(crate) fn copied_before(&self, final_lsn: Lsn) -> Vec<usize> {
        self.copied_at
            .iter()
            .enumerate()
            .filter(|(_, point)| point.is_some_and(|point| final_lsn < point))
            .map(|(route, _)| route)
            .collect()
    }

    /// Whether relation `oid` was a leaf of a removed route's table, as recorded.
    pub(crate) fn is_removed_leaf(&self, oid: u32) -> bool {
        self.removed_leaves.contains(&oid)
    }

    /// Whether relation `oid` is a removed route's table: its name, and its OID where the
    /// state file recorded one (a table created later under that name is another table,
    /// not the removed route's).
    pub(crate) fn is_removed(&self, namespace: &str, name: &str, oid: u32) -> bool {
        if self.removed.is_empty() {
            return false;
        }
        let table = PgTable {
            schema: namespace.to_owned(),
            name: name.to_owned(),
        }
        .to_string();
        self.removed
            .iter()
            .any(|(source, recorded)| *source == table && recorded.is_none_or(|r| r == oid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::routes::parse_tables;
    use crate::snapshot::state::{SnapshotPhase, StateRoute, FORMAT_VERSION};

    fn state(routes: Vec<StateRoute>) -> StateFile {
        StateFile {
            version: FORMAT_VERSION,
            system_id: "1".into(),
            database: "d".into(),
            slot: "s".into(),
            publication: "p".into(),
            pipeline: "f".into(),
            routes,
            phase: SnapshotPhase::Complete,
            consistent_point: Some(Lsn(0x100)),
            updated_at: None,
            feldera_incarnation: None,
            feldera_written_under: None,
            delivered: None,
        }
    }

    fn route(source: &str, phase: Option<RoutePhase>, point: Option<u64>) -> StateRoute {
        StateRoute {
            source: source.into(),
            target: source.trim_start_matches("public.").into(),
            phase,
            consistent_point: point.map(Lsn),
            published: None,
            leaves: Vec::new(),
            oid: None,
            copied_through: None,
        }
    }

    #[test]
    fn an_added_route_skips_exactly_the_transactions_committed_before_its_copy() {
        let routes = parse_tables("users,items").unwrap();
        let file = state(vec![
            route("public.users", None, None),
            route("public.items", Some(RoutePhase::Complete), Some(0x500)),
        ]);
        let skips = Skips::of(&file, &routes);
        assert_eq!(skips.copied_before(Lsn(0x4FF)), vec![1]);
        // The commit record at the consistent point itself is the slot's to stream.
        assert_eq!(skips.copied_before(Lsn(0x500)), Vec::<usize>::new());
        assert_eq!(skips.copied_before(Lsn(0x501)), Vec::<usize>::new());
    }

    #[test]
    fn a_pending_route_skips_nothing_and_a_removed_one_is_known_by_name() {
        let routes = parse_tables("users").unwrap();
        let file = state(vec![
            route("public.users", Some(RoutePhase::Pending), None),
            route("public.gone", Some(RoutePhase::Removed), None),
        ]);
        let skips = Skips::of(&file, &routes);
        assert!(skips.copied_before(Lsn(1)).is_empty());
        assert!(skips.is_removed("public", "gone", 1));
        assert!(!skips.is_removed("public", "users", 1));
        assert!(!skips.is_removed("other", "gone", 1));
    }

    #[test]
    fn a_removed_route_whose_oid_was_recorded_is_that_table_only() {
        let routes = parse_tables("users").unwrap();
        let mut gone = route("public.gone", Some(RoutePhase::Removed), None);
        gone.oid = Some(17000);
        let skips = Skips::of(
            &state(vec![route("public.users", None, None), gone]),
            &routes,
        );
        assert!(skips.is_removed("public", "gone", 17000));
        assert!(
            !skips.is_removed("public", "gone", 17001),
            "a table created later under the name is another table"
        );
    }
}
