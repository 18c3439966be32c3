//! What one phase hands the next: the [`Next`] a phase reports after each input, and the
//! state that travels with a change of phase (what Starting learnt, what a copy starts
//! from, which tables a TRUNCATE retracts).
//!
//! Plain data: every phase module imports it, and it imports no phase.

use super::policy::Failure;
use super::streaming::Skips;
use crate::catalog::published::RowFilter;
use crate::config::CrashPoint;
use crate::conn::Event;
use crate::contract::partitions::Placement;
use crate::pgoutput::Relation;
use crate::retract::{KeyPlan, LeftoverPlan};
use crate::schema::program::Table;
use crate::snapshot::plan::Leftovers;
use crate::snapshot::state::StateFile;
use crate::value::PgTypes;
use crate::Lsn;

/// What a phase says should happen after it handled an input.
#[derive(Debug)]
pub(crate) enum Next {
    /// Nothing changes phase.
    Stay,
    /// Starting opened the replication stream, or Snapshotting finished: stream.
    Stream(Box<StreamStart>),
    /// Starting created the slot for a snapshot: copy.
    Snapshot(Box<SnapshotStart>),
    /// Streaming read a TRUNCATE of these tables: retract.
    Retract(Vec<TableJob>),
    /// Retracting verified the truncated tables are empty: stream on.
    Resume,
    /// Something failed: the policy decides.
    Fail(Failure),
    /// A crash point was reached (`CRASH_AT`): exit 70 now.
    Crash(CrashPoint),
    /// A graceful stop finished: exit 0 with this reason.
    Stopped(String),
}

/// What the Streaming phase starts from, besides the connection (`Starting::into_repl`).
#[derive(Debug)]
pub(crate) struct StreamStart {
    pub(crate) ready: Ready,
    /// Events read after the stream opened, in the same read.
    pub(crate) pending: Vec<Event>,
    /// The state file as written or read (`None` under `SNAPSHOT_MODE=never`): the stream
    /// writes its `delivered` bound further (`streaming::bound`).
    pub(crate) record: Option<StateFile>,
    /// Routes to copy online while streaming (docs/online-copy.md), in order.
    pub(crate) online: Vec<OnlineCopy>,
}

/// What the session learnt before streaming.
#[derive(Debug)]
pub(crate) struct Ready {
    pub(crate) wal_sender_timeout_ms: u64,
    pub(crate) tables: Vec<Table>,
    /// The catalog's description of the routed columns' non-builtin types.
    pub(crate) types: PgTypes,
    pub(crate) slot_confirmed: Lsn,
    /// The route of every partition of a routed table, as the catalog showed them.
    pub(crate) placement: Placement,
    /// What the stream skips: routes copied apart from the others, removed routes (set
    /// from the state file by the phase that opens the stream).
    pub(crate) skips: Skips,
}

/// What the Starting phase hands over once the slot (and its snapshot) exists.
#[derive(Debug)]
pub(crate) struct SnapshotStart {
    /// What streaming needs afterwards; `slot_confirmed` is the consistent point (zero until
    /// the slot exists, under `SNAPSHOT_MODE=inconsistent`).
    pub(crate) ready: Ready,
    /// Each route's table as the catalog describes it (its published columns), in route
    /// order.
    pub(crate) relations: Vec<Relation>,
    /// The rows the publication publishes of each route's table, in route order: what the
    /// copy reads, and what counts as existing when leftovers are retracted.
    pub(crate) row_filters: Vec<RowFilter>,
    /// The exported snapshot; `None` under `inconsistent`, which copies first and creates
    /// the slot afterwards.
    pub(crate) snapshot: Option<String>,
    pub(crate) leftovers: Leftovers,
    /// The state file as written (`pending`, or with the added routes `pending`), and
    /// where.
    pub(crate) state: StateFile,
    pub(crate) state_path: String,
    /// A copy of routes added since the slot's own copy, under a temporary slot: `ready`
    /// then describes every route (for the stream afterwards) and its `slot_confirmed` is
    /// the temporary slot's consistent point.
    pub(crate) added: Option<AddedCopy>,
}

impl SnapshotStart {
    /// Keeps only `routes` (indexes of the configured routes) in every per-route list, in
    /// that order, so a copy of some routes numbers them by their place in `routes`; returns
    /// every route's table, for the stream afterwards. Every list indexed by route is cut
    /// here, together, so none can be read with another's numbering.
    pub(crate) fn keep_only(&mut self, routes: &[usize]) -> Vec<Table> {
        let tables = std::mem::take(&mut self.ready.tables);
        let relations = std::mem::take(&mut self.relations);
        let row_filters = std::mem::take(&mut self.row_filters);
        for &route in routes {
            self.ready.tables.push(tables[route].clone());
            self.relations.push(relations[route].clone());
            self.row_filters.push(row_filters[route].clone());
        }
        tables
    }
}

/// A copy of only the routes added to a running deployment (docs/snapshot.md, "Adding
/// and removing tables").
#[derive(Debug)]
pub(crate) struct AddedCopy {
    /// The routes copied, as indexes of the configured routes.
    pub(crate) routes: Vec<usize>,
    /// The temporary slot whose exported snapshot the copy reads; dropped once the copy is
    /// recorded, before the stream starts on the same connection.
    pub(crate) temporary_slot: String,
    /// Where the slot streamed from was confirmed: the stream continues from there.
    pub(crate) slot_confirmed: Lsn,
}

/// One table to retract.
#[derive(Debug)]
pub(crate) struct TableJob {
    pub(crate) route: usize,
    pub(crate) keys: KeyPlan,
    /// For leftovers: how to ask PostgreSQL which keys exist.
    pub(crate) leftovers: Option<LeftoverPlan>,
}

/// A route to copy online, as the start planned it.
#[derive(Clone, Debug)]
pub(crate) struct OnlineCopy {
    pub(crate) route: usize,
    pub(crate) spec: crate::backfill::chunk::TableSpec,
    pub(crate) key: crate::backfill::key::KeyColumns,
    /// The last key of the copy's last durable chunk (`None`: from the table's start).
    pub(crate) after: Option<Vec<String>>,
    /// Where the chunks are read (how they are judged).
    pub(crate) source: crate::backfill::chunk::Source,
    /// The state file records this online copy as begun: Feldera's table was not counted.
    pub(crate) resumed: bool,
}
