//! Decision traces: one scripted scenario per rule, snapshotting what the pipeline did.

use crate::pgoutput::ReplicaIdentity;
use crate::testing::wal::*;
use crate::testing::{FakePg, FakeTable, Script};

/// Snapshots a trace (or body) with the rule it proves as the snapshot's description.
macro_rules! rule {
    ($description:expr, $trace:expr $(,)?) => {
        insta::with_settings!({ description => $description, omit_expression => true }, {
            insta::assert_snapshot!($trace);
        })
    };
}

mod acks;
mod batching;
mod changes;
mod durability;
mod feldera_answers;
mod freshness;
mod idle_properties;
mod ops;
mod partitions;
mod pipelining;
mod progress;
mod properties;
mod reroute;
mod sessions;
mod snapshot;
mod snapshot_properties;
mod snapshot_regressions;
mod stopping;
mod timelines;
mod transactions;
mod truncate;
mod types;

pub(super) const SCHEMA: &str = r#"{"inputs":[
 {"name":"users","case_sensitive":false,"primary_key":["id"],"materialized":false,"properties":{},
  "fields":[{"name":"id","case_sensitive":false,"columntype":{"type":"BIGINT","nullable":false}},
            {"name":"name","case_sensitive":false,"columntype":{"type":"VARCHAR","nullable":true,"precision":-1}},
            {"name":"bio","case_sensitive":false,"columntype":{"type":"VARCHAR","nullable":true,"precision":-1}}]},
 {"name":"lineitems","case_sensitive":false,"primary_key":["sku"],"materialized":false,"properties":{},
  "fields":[{"name":"sku","case_sensitive":false,"columntype":{"type":"VARCHAR","nullable":false,"precision":-1}},
            {"name":"qty","case_sensitive":false,"columntype":{"type":"INTEGER","nullable":true}}]}
],"outputs":[]}"#;

pub(super) fn users(identity: ReplicaIdentity) -> FakeTable {
    let full = identity == ReplicaIdentity::Full;
    FakeTable::new(
        16384,
        "users",
        identity,
        &[("id", 20, true), ("name", 25, full), ("bio", 25, full)],
    )
}

pub(super) fn items() -> FakeTable {
    FakeTable::new(
        16390,
        "items",
        ReplicaIdentity::Default,
        &[("sku", 25, true), ("qty", 23, false)],
    )
}

pub(super) fn pg_with(identity: ReplicaIdentity, wal_sender_timeout: &str) -> FakePg {
    FakePg {
        wal_sender_timeout: wal_sender_timeout.into(),
        tables: vec![users(identity), items()],
        slot_confirmed: Some(START),
        truncate_published: true,
        slot_busy_answers: 0,
        temporary_slot_taken: 0,
        timeline: 1,
        timeline_history: None,
        system_id: "7000000000000000001".into(),
        via_root: false,
    }
}

pub(super) fn pg() -> FakePg {
    pg_with(ReplicaIdentity::Default, "60s")
}

/// Where the slot stands when a scripted session starts.
pub(super) const START: crate::Lsn = crate::Lsn(0x1000);

/// A route as a state file records it, with only its phase (`None`: the file's).
pub(super) fn state_route(
    source: &str,
    target: &str,
    phase: Option<crate::snapshot::state::RoutePhase>,
) -> crate::snapshot::state::StateRoute {
    crate::snapshot::state::StateRoute {
        source: source.into(),
        target: target.into(),
        phase,
        consistent_point: None,
        published: None,
        leaves: Vec::new(),
        oid: None,
        copied_through: None,
    }
}

/// A complete copy of `routes` under the scripted slot, consistent at `START`.
pub(super) fn complete_state(
    routes: Vec<crate::snapshot::state::StateRoute>,
) -> crate::snapshot::state::StateFile {
    use crate::snapshot::state::{SnapshotPhase, StateFile, FORMAT_VERSION};
    StateFile {
        version: FORMAT_VERSION,
        system_id: "7000000000000000001".into(),
        database: "app".into(),
        slot: "slotline_p".into(),
        publication: "pub".into(),
        pipeline: "p".into(),
        routes,
        phase: SnapshotPhase::Complete,
        consistent_point: Some(START),
        updated_at: None,
        feldera_incarnation: None,
        feldera_written_under: None,
        delivered: None,
    }
}

pub(super) const TABLES: (&str, &str) = ("TABLES", "users,public.items:lineitems");

/// A streaming pipeline with the two routed tables, the given extra configuration, and the
/// users Relation already sent.
pub(super) fn streaming(config: &[(&str, &str)]) -> Script {
    let mut pairs = vec![TABLES];
    pairs.extend_from_slice(config);
    let mut s = Script::streaming(&pairs, pg(), SCHEMA);
    s.wal(
        "Relation users",
        &[relation(&users(ReplicaIdentity::Default))],
    );
    s.take_trace();
    s
}

/// One transaction inserting `ids` into users, ending at `end`.
pub(super) fn insert_tx(s: &mut Script, xid: u32, end: u64, ids: &[&str]) {
    let mut messages = vec![begin(end - 0x8, xid)];
    for (i, id) in ids.iter().enumerate() {
        messages.push(insert(
            end - 0xF0 + 8 * i as u64,
            16384,
            &[Some(id), Some("n"), None],
        ));
    }
    messages.push(commit(end - 0x8, end));
    s.wal(
        &format!("tx {xid}: insert users {}", ids.join(",")),
        &messages,
    );
}

#[test]
fn startup_checks_everything_before_creating_the_slot_then_streams() {
    let mut pg = pg();
    pg.slot_confirmed = None;
    let mut s = Script::new(&[TABLES], pg, SCHEMA);
    rule!(
        "Startup asks every question (settings, publication, tables, columns, Feldera's schema, the slot) before it creates anything; the slot is created with SNAPSHOT 'nothing' only once every check passed, then replication starts.",
        s.take_trace()
    );
}

#[test]
fn a_row_of_an_unrouted_table_exits_1_once_the_catalog_was_read_again() {
    let mut s = streaming(&[]);
    let audit = FakeTable::new(
        17000,
        "audit",
        ReplicaIdentity::Default,
        &[("id", 20, true)],
    );
    s.wal(
        "Begin, Relation audit",
        &[begin(0x2000, 9), relation(&audit)],
    );
    assert!(s.exit().is_none(), "a Relation message is not a change");
    let replay = [
        begin(0x2000, 9),
        relation(&audit),
        insert(0x1F10, 17000, &[Some("1")]),
    ];
    s.wal("Insert audit", &replay[2..]);
    s.advance(200);
    s.wal("Begin, Relation audit, Insert audit (the replay)", &replay);
    assert_eq!(s.confirmed, START);
    rule!(
        "A Relation of a table TABLES does not route is only an announcement; a row of it ends the session so the catalog is read again, and when the replayed row is still unplaceable the process exits 1 naming the table and the two remedies; nothing of its transaction is acknowledged.",
        s.take_trace()
    );
    assert_eq!(s.exit().map(|e| e.0), Some(1));
}

#[test]
fn refused_start_creates_no_slot_when_a_routed_table_is_not_published() {
    let mut pg = pg();
    pg.slot_confirmed = None;
    pg.tables.retain(|t| t.relation.name == "users");
    let mut s = Script::new(&[TABLES], pg, SCHEMA);
    let trace = s.take_trace();
    assert!(!trace.contains("CREATE_REPLICATION_SLOT"), "{trace}");
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    rule!(
        "A routed table missing from the publication refuses the start before the slot is created.",
        trace.lines().last().unwrap_or("")
    );
}

#[test]
fn refused_start_creates_no_slot_under_replica_identity_nothing() {
    let mut pg = pg_with(ReplicaIdentity::Nothing, "60s");
    pg.slot_confirmed = None;
    let mut s = Script::new(&[TABLES], pg, SCHEMA);
    let trace = s.take_trace();
    assert!(!trace.contains("CREATE_REPLICATION_SLOT"), "{trace}");
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    assert!(trace.contains("REPLICA IDENTITY is NOTHING"), "{trace}");
}
