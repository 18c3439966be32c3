//! One decision trace per startup rule, and properties over random inputs.

use super::*;
use crate::snapshot::state::FORMAT_VERSION;
use crate::Lsn;
use proptest::prelude::*;

/// Snapshots a plan with the rule it proves as the snapshot's description.
macro_rules! rule {
    ($description:expr, $plan:expr $(,)?) => {
        insta::with_settings!({ description => $description, omit_expression => true }, {
            insta::assert_snapshot!($plan.to_string());
        })
    };
}

const PATH: &str = "./slotline-state/slotline_shop.state.json";
const SYSTEM: &str = "7301234567890123456";

fn routes() -> Vec<StateRoute> {
    vec![
        StateRoute {
            source: "public.users".into(),
            target: "users".into(),
            phase: None,
            consistent_point: None,
            published: None,
            leaves: Vec::new(),
            oid: None,
            copied_through: None,
        },
        StateRoute {
            source: "public.items".into(),
            target: "lineitems".into(),
            phase: None,
            consistent_point: None,
            published: None,
            leaves: Vec::new(),
            oid: None,
            copied_through: None,
        },
    ]
}

fn configured(mode: SnapshotMode, routes: &[StateRoute]) -> Configured<'_> {
    Configured {
        mode,
        state_path: PATH,
        state_dir_given: true,
        slot: "slotline_shop",
        publication: "slotline_pub",
        pipeline: "shop",
        database: "app",
        routes,
        feldera: None,
        timeline: None,
    }
}

fn state(phase: SnapshotPhase) -> StateFile {
    StateFile {
        version: FORMAT_VERSION,
        system_id: SYSTEM.into(),
        database: "app".into(),
        slot: "slotline_shop".into(),
        publication: "slotline_pub".into(),
        pipeline: "shop".into(),
        routes: routes(),
        phase,
        consistent_point: Some(Lsn(0x1A0)),
        updated_at: Some("2024-02-29T12:34:56Z".into()),
        feldera_incarnation: None,
        feldera_written_under: None,
        delivered: None,
    }
}

fn complete() -> StateRead {
    StateRead::Present(state(SnapshotPhase::Complete))
}

fn complete_with(edit: impl FnOnce(&mut StateFile)) -> StateRead {
    let mut file = state(SnapshotPhase::Complete);
    edit(&mut file);
    StateRead::Present(file)
}

fn slot(wal_status: &str, confirmed: u64) -> SlotInfo {
    SlotInfo {
        name: "slotline_shop".into(),
        plugin: Some("pgoutput".into()),
        slot_type: "logical".into(),
        database: Some("app".into()),
        active_pid: None,
        confirmed_flush: Some(Lsn(confirmed)),
        wal_status: Some(wal_status.into()),
    }
}

fn reserved() -> SlotInfo {
    slot("reserved", 0x2B0)
}

fn initial(state: &StateRead, slot: Option<&SlotInfo>) -> Plan {
    plan_startup(
        state,
        slot,
        &configured(SnapshotMode::Initial, &routes()),
        SYSTEM,
    )
}

fn never(state: &StateRead, slot: Option<&SlotInfo>) -> Plan {
    plan_startup(
        state,
        slot,
        &configured(SnapshotMode::Never, &routes()),
        SYSTEM,
    )
}

#[test]
fn absent_state_and_absent_slot_is_a_fresh_copy() {
    let plan = initial(&StateRead::Absent, None);
    assert_eq!(
        plan.action,
        Action::Snapshot {
            drop_slot: false,
            leftovers: Leftovers::IfTargetNotEmpty
        }
    );
    assert!(plan.warnings.is_empty());
    rule!("state absent + slot absent: create the slot with SNAPSHOT 'export', copy every table; retraction only where Feldera already holds rows", plan);
}

#[test]
fn absent_state_with_a_slot_drops_it_copies_and_retracts() {
    let plan = initial(&StateRead::Absent, Some(&reserved()));
    assert_eq!(
        plan.action,
        Action::Snapshot {
            drop_slot: true,
            leftovers: Leftovers::Retract
        }
    );
    rule!("state absent + slot present: a slot is no proof the target was seeded; drop, copy, retract leftovers, warn", plan);
}

#[test]
fn absent_state_with_a_slot_in_a_default_directory_is_refused_with_both_ways_out() {
    let routes = routes();
    let default_dir = Configured {
        state_dir_given: false,
        ..configured(SnapshotMode::Initial, &routes)
    };
    let plan = plan_startup(&StateRead::Absent, Some(&reserved()), &default_dir, SYSTEM);
    let Action::Refuse(message) = &plan.action else {
        panic!("not refused: {plan:?}");
    };
    for needle in [
        "set STATE_DIR",
        "slotline drop-slot --yes",
        PATH,
        "Nothing was changed",
    ] {
        assert!(message.contains(needle), "{needle:?} missing: {message}");
    }
    let no_slot = plan_startup(&StateRead::Absent, None, &default_dir, SYSTEM);
    assert!(
        matches!(
            no_slot.action,
            Action::Snapshot {
                drop_slot: false,
                ..
            }
        ),
        "a first start in the default directory copies: {no_slot:?}"
    );
    let lost = plan_startup(
        &StateRead::Absent,
        Some(&slot("lost", 0x2B0)),
        &default_dir,
        SYSTEM,
    );
    assert!(
        matches!(
            lost.action,
            Action::Snapshot {
                drop_slot: true,
                ..
            }
        ),
        "a lost slot is copied again wherever its state went: {lost:?}"
    );
    let never = Configured {
        state_dir_given: false,
        ..configured(SnapshotMode::Never, &routes)
    };
    let streams = plan_startup(&StateRead::Absent, Some(&reserved()), &never, SYSTEM);
    assert_eq!(streams.action, Action::StreamOnly { create_slot: false });
    rule!("state absent + slot present + STATE_DIR unset: refuse, naming STATE_DIR and drop-slot --yes", plan);
}

#[test]
fn pending_state_with_a_slot_is_an_interrupted_copy() {
    let plan = initial(
        &StateRead::Present(state(SnapshotPhase::Pending)),
        Some(&reserved()),
    );
    assert_eq!(
        plan.action,
        Action::Snapshot {
            drop_slot: true,
            leftovers: Leftovers::Retract
        }
    );
    rule!("state pending + slot present: an interrupted copy; drop the slot, copy again, retract leftovers", plan);
}

#[test]
fn pending_state_without_a_slot_copies_again_with_retraction() {
    let mut file = state(SnapshotPhase::Pending);
    file.consistent_point = None;
    let plan = initial(&StateRead::Present(file), None);
    assert_eq!(
        plan.action,
        Action::Snapshot {
            drop_slot: false,
            leftovers: Leftovers::Retract
        }
    );
    rule!("state pending + slot absent (crash before the slot was created): copy again, retract leftovers", plan);
}

#[test]
fn complete_state_with_its_slot_streams() {
    let plan = initial(&complete(), Some(&reserved()));
    assert_eq!(plan.action, Action::Stream);
    assert!(plan.warnings.is_empty());
    rule!("state complete + slot present + same system, database, pipeline and routes: stream from the slot", plan);
}

#[test]
fn complete_state_streams_whatever_the_order_of_the_routes() {
    let mut reversed = routes();
    reversed.reverse();
    let plan = plan_startup(
        &complete(),
        Some(&reserved()),
        &configured(SnapshotMode::Initial, &reversed),
        SYSTEM,
    );
    assert_eq!(plan.action, Action::Stream);
}

#[test]
fn complete_state_without_its_slot_copies_again_loudly() {
    let plan = initial(&complete(), None);
    assert_eq!(
        plan.action,
        Action::Snapshot {
            drop_slot: false,
            leftovers: Leftovers::Retract
        }
    );
    rule!("state complete + slot absent: the WAL since the last acknowledgement may be gone; copy again, retract leftovers, warn loudly", plan);
}

#[test]
fn complete_state_from_another_cluster_copies_again() {
    let plan = plan_startup(
        &complete(),
        Some(&reserved()),
        &configured(SnapshotMode::Initial, &routes()),
        "7399999999999999999",
    );
    assert_eq!(
        plan.action,
        Action::Snapshot {
            drop_slot: true,
            leftovers: Leftovers::Retract
        }
    );
    rule!("state complete + another system identifier (restored or failed-over cluster): drop the slot, copy again, retract; the warning names old -> new", plan);
}

#[test]
fn complete_state_for_another_database_copies_again() {
    let plan = initial(
        &complete_with(|file| file.database = "app_old".into()),
        Some(&reserved()),
    );
    assert!(matches!(
        plan.action,
        Action::Snapshot {
            drop_slot: true,
            leftovers: Leftovers::Retract
        }
    ));
    rule!("state complete + another database: drop the slot, copy again, retract; the warning names old -> new", plan);
}

#[test]
fn complete_state_for_another_pipeline_copies_again() {
    let plan = initial(
        &complete_with(|file| file.pipeline = "shop_v1".into()),
        Some(&reserved()),
    );
    assert!(matches!(
        plan.action,
        Action::Snapshot {
            drop_slot: true,
            leftovers: Leftovers::Retract
        }
    ));
    rule!("state complete + another Feldera pipeline: drop the slot, copy again, retract; the warning names old -> new", plan);
}

#[test]
fn complete_state_for_other_routes_copies_only_the_added_ones() {
    let plan = initial(
        &complete_with(|file| {
            file.routes[1].target = "items".into();
            file.routes.push(StateRoute {
                source: "public.orders".into(),
                target: "orders".into(),
                phase: None,
                consistent_point: None,
                published: None,
                leaves: Vec::new(),
                oid: None,
                copied_through: None,
            });
        }),
        Some(&reserved()),
    );
    let Action::Reroute {
        copy,
        removed,
        leftovers,
        ..
    } = &plan.action
    else {
        panic!("{plan}");
    };
    assert_eq!(copy.len(), 1);
    assert_eq!(removed.len(), 2);
    assert_eq!(*leftovers, Leftovers::IfTargetNotEmpty);
    rule!("state complete + a changed set of routes, nothing else changed: keep the slot, copy only the added route, warn that the removed ones go stale", plan);
}

/// The file a start rewrites first for a change of routes, as it reads.
fn rerouted(plan: &Plan) -> String {
    let Action::Reroute { routes, .. } = &plan.action else {
        panic!("{plan}");
    };
    routes
        .iter()
        .map(|r| format!("{}\n", serde_json::to_string(r).unwrap()))
        .collect()
}

#[test]
fn an_added_route_is_copied_alone_and_recorded_pending_first() {
    let plan = initial(
        &complete_with(|file| {
            file.routes.truncate(1);
        }),
        Some(&reserved()),
    );
    assert!(matches!(
        &plan.action,
        Action::Reroute { copy, removed, leftovers: Leftovers::IfTargetNotEmpty, .. }
            if copy.len() == 1 && copy[0].source == "public.items" && removed.is_empty()
    ));
    assert!(plan.warnings.is_empty(), "{plan}");
    rule!("state complete + a route added: copy only it (retract only if its Feldera table holds rows), the rest streams on", plan);
    insta::assert_snapshot!(rerouted(&plan), @r#"
    {"source":"public.users","target":"users"}
    {"source":"public.items","target":"lineitems","phase":"pending"}
    "#);
}

#[test]
fn an_added_route_whose_copy_was_interrupted_is_copied_again_with_its_leftovers_retracted() {
    let plan = initial(
        &complete_with(|file| {
            file.routes[1].phase = Some(RoutePhase::Pending);
        }),
        Some(&reserved()),
    );
    assert!(matches!(
        &plan.action,
        Action::Reroute { copy, leftovers: Leftovers::Retract, .. }
            if copy.len() == 1 && copy[0].source == "public.items"
    ));
    rule!(
        "state complete + a route's own copy pending: copy it again, retracting leftovers",
        plan
    );
}

#[test]
fn a_route_added_again_after_its_removal_is_copied_again() {
    let plan = initial(
        &complete_with(|file| {
            file.routes[1].phase = Some(RoutePhase::Removed);
        }),
        Some(&reserved()),
    );
    assert!(matches!(
        &plan.action,
        Action::Reroute { copy, leftovers: Leftovers::Retract, .. } if copy.len() == 1
    ));
}

#[test]
fn a_removed_route_is_recorded_removed_and_the_slot_streams_on() {
    let one = vec![routes()[0].clone()];
    let configured = configured(SnapshotMode::Initial, &one);
    let plan = plan_startup(&complete(), Some(&reserved()), &configured, SYSTEM);
    assert!(matches!(
        &plan.action,
        Action::Reroute { copy, removed, .. } if copy.is_empty() && removed.len() == 1
    ));
    rule!("state complete + a route removed: nothing copied; its Feldera rows stay (warned), the slot streams on", plan);
    insta::assert_snapshot!(rerouted(&plan), @r#"
    {"source":"public.users","target":"users"}
    {"source":"public.items","target":"lineitems","phase":"removed"}
    "#);
    // Once recorded, the removal is no change any more.
    let Action::Reroute { routes, .. } = plan.action else {
        unreachable!()
    };
    let again = plan_startup(
        &complete_with(|file| file.routes = routes),
        Some(&reserved()),
        &configured,
        SYSTEM,
    );
    assert_eq!(again.action, Action::Stream, "{again}");
}

#[test]
fn a_route_change_with_a_new_system_copies_everything() {
    let plan = initial(
        &complete_with(|file| {
            file.routes.truncate(1);
            file.system_id = "7399999999999999999".into();
        }),
        Some(&reserved()),
    );
    assert!(matches!(
        plan.action,
        Action::Snapshot {
            drop_slot: true,
            ..
        }
    ));
    assert!(
        plan.warnings[0].contains("added public.items:lineitems"),
        "{plan}"
    );
}

#[test]
fn every_change_is_named_in_one_warning() {
    let plan = plan_startup(
        &complete_with(|file| {
            file.database = "app_old".into();
            file.routes.pop();
        }),
        None,
        &configured(SnapshotMode::Initial, &routes()),
        "7399999999999999999",
    );
    assert!(matches!(
        plan.action,
        Action::Snapshot {
            drop_slot: false,
            leftovers: Leftovers::Retract
        }
    ));
    rule!("state complete + several changes and no slot: one warning naming every change, copy again, retract", plan);
}

#[test]
fn a_changed_publication_alone_still_streams_with_a_warning() {
    let plan = initial(
        &complete_with(|file| file.publication = "old_pub".into()),
        Some(&reserved()),
    );
    assert_eq!(plan.action, Action::Stream);
    assert_eq!(plan.warnings.len(), 1);
    rule!("state complete + only the publication's name changed: the routes say what the copy holds, so stream, with a warning", plan);
}

#[test]
fn an_unparseable_state_file_refuses() {
    let error = StateFile::parse(b"{\"version\": 7}").unwrap_err();
    let plan = initial(&StateRead::Unreadable(error), Some(&reserved()));
    assert!(matches!(plan.action, Action::Refuse(_)));
    rule!("state unreadable (parse failure): refuse, naming the file, its problem and the remedy; never taken as absent", plan);
}

#[test]
fn a_state_file_that_cannot_be_read_refuses() {
    let error = StateError::Read("Permission denied (os error 13)".into());
    let plan = initial(&StateRead::Unreadable(error), None);
    assert!(matches!(plan.action, Action::Refuse(_)));
    rule!(
        "state unreadable (read failure reported by the shell): refuse, never taken as absent",
        plan
    );
}

#[test]
fn a_state_file_of_another_slot_refuses() {
    let plan = initial(
        &complete_with(|file| file.slot = "slotline_other".into()),
        Some(&reserved()),
    );
    assert!(matches!(plan.action, Action::Refuse(_)));
    rule!(
        "state file records another slot (copied or misplaced): refuse as a foreign file",
        plan
    );
}

#[test]
fn a_lost_slot_is_dropped_and_the_copy_redone() {
    let plan = initial(&complete(), Some(&slot("lost", 0x2B0)));
    assert_eq!(
        plan.action,
        Action::Snapshot {
            drop_slot: true,
            leftovers: Leftovers::Retract
        }
    );
    rule!("state complete + slot lost (wal_status = lost): never stream from it; drop it, copy again, retract, warn loudly", plan);
}

#[test]
fn a_lost_slot_without_state_is_dropped_with_one_warning() {
    let plan = initial(&StateRead::Absent, Some(&slot("lost", 0x2B0)));
    assert_eq!(
        plan.action,
        Action::Snapshot {
            drop_slot: true,
            leftovers: Leftovers::Retract
        }
    );
    assert_eq!(plan.warnings.len(), 1, "{plan}");
    rule!(
        "state absent + slot lost: drop it, copy, retract; the lost slot is the one warning",
        plan
    );
}

#[test]
fn a_slot_behind_the_copys_consistent_point_copies_again() {
    let plan = initial(&complete(), Some(&slot("reserved", 0x100)));
    assert!(matches!(
        plan.action,
        Action::Snapshot {
            drop_slot: true,
            leftovers: Leftovers::Retract
        }
    ));
    rule!("state complete + slot confirmed before the copy's consistent point (the database went back in time): drop it, copy again, retract", plan);
}

#[test]
fn a_slot_at_the_consistent_point_streams() {
    let plan = initial(&complete(), Some(&slot("reserved", 0x1A0)));
    assert_eq!(plan.action, Action::Stream);
}

#[test]
fn an_unreserved_slot_streams_with_a_warning() {
    let plan = initial(&complete(), Some(&slot("unreserved", 0x2B0)));
    assert_eq!(plan.action, Action::Stream);
    rule!("state complete + slot unreserved: still streamable, so stream, warning that its WAL is about to go", plan);
}

#[test]
fn never_creates_an_absent_slot_with_no_snapshot() {
    let plan = never(&StateRead::Absent, None);
    assert_eq!(plan.action, Action::StreamOnly { create_slot: true });
    rule!(
        "mode never + slot absent: create it with SNAPSHOT 'nothing', stream; no state file",
        plan
    );
}

#[test]
fn never_streams_from_a_present_slot_and_ignores_the_state_file() {
    let plan = never(&complete(), Some(&reserved()));
    assert_eq!(plan.action, Action::StreamOnly { create_slot: false });
    rule!("mode never + state file present + slot present: the file is ignored (a trace line says so), stream from the slot", plan);
}

#[test]
fn never_ignores_an_unreadable_state_file() {
    let plan = never(&StateRead::Unreadable(StateError::Empty), None);
    assert_eq!(plan.action, Action::StreamOnly { create_slot: true });
    rule!("mode never + state file unreadable: ignored, like every state file in this mode (the trace says it exists)", plan);
}

#[test]
fn never_warns_about_an_interrupted_copy_it_ignores() {
    let plan = never(
        &StateRead::Present(state(SnapshotPhase::Pending)),
        Some(&reserved()),
    );
    assert_eq!(plan.action, Action::StreamOnly { create_slot: false });
    rule!("mode never + state pending: ignored, but the partial copy Feldera may hold is warned about", plan);
}

#[test]
fn never_refuses_a_lost_slot() {
    let plan = never(&StateRead::Absent, Some(&slot("lost", 0x2B0)));
    assert!(matches!(plan.action, Action::Refuse(_)));
    rule!("mode never + slot lost: refuse with the remedy; never has no copy to repair the missing WAL", plan);
}

#[test]
fn inconsistent_fresh_start_copies_before_creating_the_slot() {
    let plan = plan_startup(
        &StateRead::Absent,
        None,
        &configured(SnapshotMode::Inconsistent, &routes()),
        SYSTEM,
    );
    assert_eq!(
        plan.action,
        Action::Snapshot {
            drop_slot: false,
            leftovers: Leftovers::IfTargetNotEmpty
        }
    );
    rule!("mode inconsistent + state absent + slot absent: the rules of initial; the trace says the copy runs first and the slot follows", plan);
}

#[test]
fn inconsistent_follows_the_rules_of_initial() {
    let reads = [
        StateRead::Absent,
        StateRead::Present(state(SnapshotPhase::Pending)),
        complete(),
        complete_with(|file| file.system_id = "1".into()),
        complete_with(|file| file.slot = "x".into()),
        StateRead::Unreadable(StateError::Empty),
    ];
    let slots = [None, Some(reserved()), Some(slot("lost", 1))];
    for read in &reads {
        for slot in &slots {
            let of = |mode| {
                plan_startup(read, slot.as_ref(), &configured(mode, &routes()), SYSTEM).action
            };
            assert_eq!(
                of(SnapshotMode::Inconsistent),
                of(SnapshotMode::Initial),
                "{read:?} {slot:?}"
            );
        }
    }
}

// Properties. Inputs come from small alphabets weighted towards "as recorded", so that
// streaming, every re-snapshot and every refusal all occur; the same check also runs over
// the whole grid of those alphabets.

const MODES: [SnapshotMode; 3] = [
    SnapshotMode::Initial,
    SnapshotMode::Never,
    SnapshotMode::Inconsistent,
];

fn other_routes() -> Vec<StateRoute> {
    let mut other = routes();
    other[1].target = "items".into();
    other
}

/// One recorded file per combination of: same or other system, database, slot,
/// publication, pipeline and routes; phase; consistent point before, at or after the slot's.
fn file(same: [bool; 6], complete: bool, point: Option<u64>) -> StateFile {
    let pick = |same: bool, yes: &str, no: &str| if same { yes } else { no }.to_owned();
    StateFile {
        version: FORMAT_VERSION,
        system_id: pick(same[0], SYSTEM, "7399999999999999999"),
        database: pick(same[1], "app", "app_old"),
        slot: pick(same[2], "slotline_shop", "slotline_other"),
        publication: pick(same[3], "slotline_pub", "old_pub"),
        pipeline: pick(same[4], "shop", "shop_v1"),
        routes: if same[5] { routes() } else { other_routes() },
        phase: if complete {
            SnapshotPhase::Complete
        } else {
            SnapshotPhase::Pending
        },
        consistent_point: point.map(Lsn),
        updated_at: None,
        feldera_incarnation: None,
        feldera_written_under: None,
        delivered: None,
    }
}

fn slot_with(wal_status: Option<&str>, confirmed: Option<u64>) -> SlotInfo {
    SlotInfo {
        confirmed_flush: confirmed.map(Lsn),
        wal_status: wal_status.map(str::to_owned),
        ..reserved()
    }
}

fn arb_read() -> impl Strategy<Value = StateRead> {
    let file = (
        prop::array::uniform6(prop::bool::weighted(0.8)),
        any::<bool>(),
        prop::option::of(prop::sample::select(vec![0x100u64, 0x1A0, 0x300])),
    )
        .prop_map(|(same, complete, point)| {
            // A complete file always has its point (parsing guarantees it).
            let point = if complete {
                point.or(Some(0x1A0))
            } else {
                point
            };
            StateRead::Present(file(same, complete, point))
        });
    prop_oneof![
        1 => Just(StateRead::Absent),
        1 => Just(StateRead::Unreadable(StateError::Empty)),
        1 => Just(StateRead::Unreadable(StateError::Read("EIO".into()))),
        4 => file,
    ]
}

fn arb_slot() -> impl Strategy<Value = Option<SlotInfo>> {
    prop::option::weighted(
        0.75,
        (
            prop::option::of(prop::sample::select(vec![
                "reserved",
                "extended",
                "unreserved",
                "lost",
            ])),
            prop::option::of(prop::sample::select(vec![0x100u64, 0x1A0, 0x2B0])),
        )
            .prop_map(|(status, confirmed)| slot_with(status, confirmed)),
    )
}

/// The only inputs under which streaming from the slot as it is can be right.
fn may_stream(read: &StateRead, slot: Option<&SlotInfo>, configured: &Configured<'_>) -> bool {
    may_keep_slot(read, slot, configured) && same_routes(read, configured)
}

fn same_routes(read: &StateRead, configured: &Configured<'_>) -> bool {
    let StateRead::Present(file) = read else {
        return false;
    };
    file.routes.iter().collect::<BTreeSet<_>>() == configured.routes.iter().collect::<BTreeSet<_>>()
}

/// The only inputs under which the slot may be kept (streamed from as it is, or after
/// copying only added routes).
fn may_keep_slot(read: &StateRead, slot: Option<&SlotInfo>, configured: &Configured<'_>) -> bool {
    let (StateRead::Present(file), Some(slot)) = (read, slot) else {
        return false;
    };
    file.phase == SnapshotPhase::Complete
        && file.slot == configured.slot
        && file.system_id == SYSTEM
        && file.database == configured.database
        && file.pipeline == configured.pipeline
        && slot.wal_status.as_deref() != Some("lost")
        && !matches!((slot.confirmed_flush, file.consistent_point), (Some(c), Some(p)) if c < p)
}

fn is_lost(slot: Option<&SlotInfo>) -> bool {
    slot.is_some_and(|s| s.wal_status.as_deref() == Some("lost"))
}

/// Every invariant of a plan; the name of the action on success (for coverage).
fn check(
    mode: SnapshotMode,
    read: &StateRead,
    slot: Option<&SlotInfo>,
) -> Result<&'static str, String> {
    let routes = routes();
    let configured = configured(mode, &routes);
    let plan = plan_startup(read, slot, &configured, SYSTEM);
    let fail = |why: &str| Err(format!("{why}: {mode:?} {read:?} {slot:?}\n{plan}"));
    let unreadable = matches!(read, StateRead::Unreadable(_));
    let seeded = mode != SnapshotMode::Never;
    if plan.trace.len() < 4 {
        return fail("every plan explains itself");
    }
    if seeded && unreadable && !matches!(plan.action, Action::Refuse(_)) {
        return fail("an unreadable file is never taken as absent");
    }
    if seeded && may_stream(read, slot, &configured) && plan.action != Action::Stream {
        return fail("a complete copy for this setup with a usable slot streams");
    }
    let reroute =
        seeded && may_keep_slot(read, slot, &configured) && !same_routes(read, &configured);
    if reroute != matches!(plan.action, Action::Reroute { .. }) {
        return fail("only a change of routes alone keeps the slot and copies the added routes");
    }
    Ok(match &plan.action {
        Action::Stream if !seeded => return fail("never streams only (StreamOnly)"),
        Action::Stream if !may_stream(read, slot, &configured) => {
            return fail("Stream without a complete copy for this setup and a usable slot")
        }
        Action::Stream => "stream",
        Action::StreamOnly { .. } if seeded => return fail("StreamOnly outside mode never"),
        Action::StreamOnly { create_slot } if *create_slot != slot.is_none() => {
            return fail("a slot is created exactly when absent")
        }
        Action::StreamOnly { .. } => "stream only",
        Action::Snapshot { .. } if !seeded => return fail("mode never never copies"),
        Action::Snapshot { drop_slot, .. } if *drop_slot != slot.is_some() => {
            return fail("a copy drops the slot exactly when one exists")
        }
        Action::Snapshot {
            drop_slot,
            leftovers,
        } if (*drop_slot || matches!(read, StateRead::Present(_)))
            && *leftovers != Leftovers::Retract =>
        {
            return fail("a copy after a slot or an earlier state retracts leftovers")
        }
        Action::Snapshot { leftovers, .. } if *leftovers == Leftovers::Retract => {
            if plan.warnings.is_empty() {
                return fail("a re-snapshot is never silent");
            }
            "snapshot, retract"
        }
        Action::Snapshot { .. } => "snapshot, if target not empty",
        Action::Reroute {
            copy,
            removed,
            routes,
            ..
        } => {
            let StateRead::Present(file) = read else {
                return fail("a reroute without a state file");
            };
            for route in configured.routes {
                let recorded = file.routes.iter().find(|r| r.same_route(route));
                let copied = copy.iter().any(|c| c.same_route(route));
                if copied == recorded.is_some() {
                    return fail("exactly the routes the copy did not cover are copied");
                }
                if !routes.iter().any(|r| r.same_route(route)) {
                    return fail("the rewritten file records every configured route");
                }
            }
            for recorded in &file.routes {
                let wanted = configured.routes.iter().any(|w| w.same_route(recorded));
                if wanted == removed.iter().any(|r| r.same_route(recorded)) {
                    return fail("exactly the routes no longer configured are removed");
                }
            }
            if !removed.is_empty() && plan.warnings.is_empty() {
                return fail("a removed route is never silent");
            }
            "reroute"
        }
        Action::Refuse(_) if !seeded && !is_lost(slot) => {
            return fail("mode never refuses only a lost slot")
        }
        Action::Refuse(_) if !seeded => "refuse lost slot",
        Action::Refuse(_) => {
            let foreign = matches!(read, StateRead::Present(file) if file.slot != configured.slot);
            if !unreadable && !foreign {
                return fail("initial refuses only an unreadable or foreign file");
            }
            "refuse file"
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn plans_keep_the_startup_invariants(
        mode in prop::sample::select(MODES.to_vec()),
        read in arb_read(),
        slot in arb_slot(),
    ) {
        check(mode, &read, slot.as_ref()).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn never_decides_from_the_slot_alone(read in arb_read(), slot in arb_slot()) {
        let plan = never(&read, slot.as_ref());
        let without_state = never(&StateRead::Absent, slot.as_ref());
        prop_assert_eq!(plan.action, without_state.action);
    }
}

#[test]
fn every_input_of_the_grid_keeps_the_invariants_and_every_action_occurs() {
    let mut reads = vec![StateRead::Absent, StateRead::Unreadable(StateError::Empty)];
    for bits in 0..64u8 {
        let same = std::array::from_fn(|i| bits & (1 << i) != 0);
        for point in [None, Some(0x100), Some(0x1A0), Some(0x300)] {
            reads.push(StateRead::Present(file(same, false, point)));
            if point.is_some() {
                reads.push(StateRead::Present(file(same, true, point)));
            }
        }
    }
    let mut slots = vec![None];
    for status in [None, Some("reserved"), Some("unreserved"), Some("lost")] {
        for confirmed in [None, Some(0x100), Some(0x1A0), Some(0x2B0)] {
            slots.push(Some(slot_with(status, confirmed)));
        }
    }
    let mut seen = BTreeSet::new();
    for mode in MODES {
        for read in &reads {
            for slot in &slots {
                seen.insert(check(mode, read, slot.as_ref()).unwrap_or_else(|e| panic!("{e}")));
            }
        }
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        [
            "refuse file",
            "refuse lost slot",
            "reroute",
            "snapshot, if target not empty",
            "snapshot, retract",
            "stream",
            "stream only",
        ]
    );
}

/// The plan with Feldera as found now: incarnation `now`, an earlier session of this run
/// having seen `seen_before`, and whether restarts keep the tables (fault tolerance).
fn with_feldera(
    mode: SnapshotMode,
    state: &StateRead,
    slot: Option<&SlotInfo>,
    now: &str,
    seen_before: Option<&str>,
    keeps_state: bool,
    on_restart: FelderaRestart,
) -> Plan {
    let routes = routes();
    let mut configured = configured(mode, &routes);
    configured.feldera = Some(FelderaNow {
        incarnation: now,
        seen_before,
        keeps_state,
        on_restart,
        pipeline_id: None,
        resumed: Some(true),
        initial_start_time: None,
        seen_under: None,
    });
    plan_startup(state, slot, &configured, SYSTEM)
}

fn copied_to(incarnation: &str) -> StateRead {
    complete_with(|f| f.feldera_incarnation = Some(incarnation.into()))
}

#[test]
fn a_copy_written_to_an_earlier_incarnation_of_a_pipeline_without_fault_tolerance_is_copied_again()
{
    let plan = with_feldera(
        SnapshotMode::Initial,
        &copied_to("inc-1"),
        Some(&reserved()),
        "inc-2",
        None,
        false,
        FelderaRestart::Resnapshot,
    );
    assert_eq!(
        plan.action,
        Action::Snapshot {
            drop_slot: true,
            leftovers: Leftovers::Retract
        }
    );
    assert_eq!(plan.warnings.len(), 1);
    rule!("state complete, written to incarnation inc-1 of a pipeline without fault tolerance that now runs as inc-2 (its tables came back empty): drop the slot, copy again, retract leftovers", plan);
}

#[test]
fn with_feldera_restart_exit_the_emptied_pipeline_is_refused() {
    let plan = with_feldera(
        SnapshotMode::Initial,
        &copied_to("inc-1"),
        Some(&reserved()),
        "inc-2",
        None,
        false,
        FelderaRestart::Exit,
    );
    let Action::Refuse(message) = &plan.action else {
        panic!("{plan}");
    };
    assert!(message.contains("inc-1 -> inc-2"), "{message}");
    assert!(message.contains("FELDERA_RESTART=resnapshot"), "{message}");
}

#[test]
fn the_same_incarnation_or_a_pipeline_that_resumes_from_checkpoints_streams() {
    for (now, keeps_state) in [("inc-1", false), ("inc-2", true)] {
        let plan = with_feldera(
            SnapshotMode::Initial,
            &copied_to("inc-1"),
            Some(&reserved()),
            now,
            None,
            keeps_state,
            FelderaRestart::Exit,
        );
        assert_eq!(plan.action, Action::Stream, "{now} {keeps_state}: {plan}");
    }
}

#[test]
fn without_an_incarnation_in_the_state_file_the_one_this_run_saw_decides() {
    let stream = with_feldera(
        SnapshotMode::Initial,
        &complete(),
        Some(&reserved()),
        "inc-2",
        None,
        false,
        FelderaRestart::Resnapshot,
    );
    assert_eq!(
        stream.action,
        Action::Stream,
        "nothing to compare: {stream}"
    );
    let copy = with_feldera(
        SnapshotMode::Initial,
        &complete(),
        Some(&reserved()),
        "inc-2",
        Some("inc-1"),
        false,
        FelderaRestart::Resnapshot,
    );
    assert!(matches!(copy.action, Action::Snapshot { .. }), "{copy}");
    // The state file's record wins over the run's memory.
    let file_wins = with_feldera(
        SnapshotMode::Initial,
        &copied_to("inc-2"),
        Some(&reserved()),
        "inc-2",
        Some("inc-1"),
        false,
        FelderaRestart::Resnapshot,
    );
    assert_eq!(file_wins.action, Action::Stream, "{file_wins}");
}

#[test]
fn mode_never_only_warns_about_an_emptied_pipeline_unless_told_to_exit() {
    let warned = with_feldera(
        SnapshotMode::Never,
        &StateRead::Absent,
        Some(&reserved()),
        "inc-2",
        Some("inc-1"),
        false,
        FelderaRestart::Resnapshot,
    );
    assert_eq!(warned.action, Action::StreamOnly { create_slot: false });
    assert!(
        warned
            .warnings
            .iter()
            .any(|w| w.contains("SNAPSHOT_MODE=never")),
        "{warned}"
    );
    let refused = with_feldera(
        SnapshotMode::Never,
        &StateRead::Absent,
        Some(&reserved()),
        "inc-2",
        Some("inc-1"),
        false,
        FelderaRestart::Exit,
    );
    assert!(matches!(refused.action, Action::Refuse(_)), "{refused}");
}

/// The configured routes with what the publication publishes of each now.
fn published_now(users: &str, items: &str) -> Vec<StateRoute> {
    let mut now = routes();
    now[0].published = Some(users.into());
    now[1].published = Some(items.into());
    now
}

#[test]
fn a_changed_row_filter_or_column_list_copies_that_table_again_retracting_its_leftovers() {
    let before = complete_with(|file| {
        file.routes[0].published = Some("every row; every column".into());
        file.routes[1].published = Some("every row; columns but blob".into());
    });
    let now = published_now(
        "rows where ((id % 3) <> 0); every column",
        "every row; columns but blob",
    );
    let plan = plan_startup(
        &before,
        Some(&reserved()),
        &configured(SnapshotMode::Initial, &now),
        SYSTEM,
    );
    assert!(
        matches!(
            &plan.action,
            Action::Reroute { copy, removed, leftovers: Leftovers::Retract, .. }
                if copy.len() == 1 && copy[0].source == "public.users" && removed.is_empty()
        ),
        "{plan}"
    );
    assert!(
        plan.warnings
            .iter()
            .any(|w| w.contains("public.users") && w.contains("((id % 3) <> 0)")),
        "{plan}"
    );
    rule!("state complete + what the publication publishes of a table changed: copy it again, retracting leftovers; the rest streams on", plan);
    insta::assert_snapshot!(rerouted(&plan), @r#"
    {"source":"public.users","target":"users","phase":"pending","published":"rows where ((id % 3) <> 0); every column"}
    {"source":"public.items","target":"lineitems","published":"every row; columns but blob"}
    "#);

    // The same publication: nothing to do.
    let same = published_now("every row; every column", "every row; columns but blob");
    let plan = plan_startup(
        &before,
        Some(&reserved()),
        &configured(SnapshotMode::Initial, &same),
        SYSTEM,
    );
    assert_eq!(plan.action, Action::Stream, "{plan}");
}

#[test]
fn a_state_file_that_does_not_say_what_was_published_streams_on() {
    let now = published_now(
        "rows where ((id % 3) <> 0); every column",
        "every row; every column",
    );
    let plan = plan_startup(
        &complete(),
        Some(&reserved()),
        &configured(SnapshotMode::Initial, &now),
        SYSTEM,
    );
    assert_eq!(
        plan.action,
        Action::Stream,
        "no change can be read from a file without it: {plan}"
    );
}

/// A copy written to incarnation `inc-1` of pipeline `pid-1` (fault tolerance `model`,
/// its line of checkpoints begun at second 100).
fn copied_under(model: &str) -> StateRead {
    complete_with(|f| {
        f.feldera_incarnation = Some("inc-1".into());
        f.feldera_written_under = Some(WrittenUnder {
            pipeline_id: Some("pid-1".into()),
            fault_tolerance: Some(model.into()),
            initial_start_time: Some(100),
        });
    })
}

/// The plan of a start that finds a fault-tolerant pipeline as `inc-2`, with `id`,
/// `resumed` and `initial_start_time` as Feldera reports them.
fn restarted_ft(
    state: &StateRead,
    id: Option<&str>,
    resumed: Option<bool>,
    initial_start_time: Option<u64>,
) -> Plan {
    let routes = routes();
    let mut configured = configured(SnapshotMode::Initial, &routes);
    configured.feldera = Some(FelderaNow {
        incarnation: "inc-2",
        seen_before: None,
        keeps_state: true,
        on_restart: FelderaRestart::Resnapshot,
        pipeline_id: id,
        resumed,
        initial_start_time,
        seen_under: None,
    });
    plan_startup(state, Some(&reserved()), &configured, SYSTEM)
}

fn copies_again(plan: &Plan) -> bool {
    matches!(
        plan.action,
        Action::Snapshot {
            drop_slot: true,
            leftovers: Leftovers::Retract
        }
    )
}

#[test]
fn a_fault_tolerant_restart_is_trusted_only_when_it_resumed_from_the_copys_checkpoints() {
    // Resumed from the line the copy was written under: the tables kept the copy.
    let resumed = restarted_ft(
        &copied_under("at_least_once"),
        Some("pid-1"),
        Some(true),
        Some(100),
    );
    assert_eq!(resumed.action, Action::Stream, "{resumed}");
    // Switched from none to at_least_once: the first restart had nothing to resume.
    let switched = restarted_ft(&copied_under("none"), Some("pid-1"), Some(false), Some(300));
    assert!(copies_again(&switched), "{switched}");
    assert!(
        switched
            .warnings
            .iter()
            .any(|w| w.contains("ran without fault tolerance when slotline wrote to it")),
        "{switched}"
    );
    rule!("state complete, written to a pipeline without fault tolerance, found restarted with at_least_once and nothing resumed (initial_start_time = start_time): copy again, retract leftovers", switched);
    // Storage cleared under fault tolerance: came back with nothing as well.
    let cleared = restarted_ft(
        &copied_under("exactly_once"),
        Some("pid-1"),
        Some(false),
        Some(300),
    );
    assert!(copies_again(&cleared), "{cleared}");
    assert!(
        cleared
            .warnings
            .iter()
            .any(|w| w.contains("storage was cleared")),
        "{cleared}"
    );
    // Resumed, but from checkpoints of another line (storage replaced).
    let replaced = restarted_ft(
        &copied_under("at_least_once"),
        Some("pid-1"),
        Some(true),
        Some(50),
    );
    assert!(copies_again(&replaced), "{replaced}");
    assert!(
        replaced
            .warnings
            .iter()
            .any(|w| w.contains("initial_start_time 100 -> 50")),
        "{replaced}"
    );
}

#[test]
fn a_pipeline_created_again_under_its_name_is_an_emptied_pipeline_even_as_the_same_incarnation_name(
) {
    let recreated = restarted_ft(
        &copied_under("at_least_once"),
        Some("pid-2"),
        Some(true),
        Some(100),
    );
    assert!(copies_again(&recreated), "{recreated}");
    assert!(
        recreated
            .warnings
            .iter()
            .any(|w| w.contains("deleted and created again (pipeline id pid-1 -> pid-2)")),
        "{recreated}"
    );
}

#[test]
fn a_feldera_that_does_not_say_whether_it_resumed_is_trusted_with_a_warning() {
    let old = restarted_ft(&copied_under("at_least_once"), Some("pid-1"), None, None);
    assert_eq!(old.action, Action::Stream, "{old}");
    assert!(old.warnings.iter().any(|w| w.contains("v0.125")), "{old}");
    // A file written before slotline recorded the pipeline: the evidence of this start
    // still decides.
    let fresh = restarted_ft(&copied_to("inc-1"), Some("pid-1"), Some(false), Some(300));
    assert!(copies_again(&fresh), "{fresh}");
}

/// A complete file whose bound says Feldera may hold WAL of timeline 1 up to `through`,
/// planned against a server on timeline 2 whose history is `history`.
fn on_timeline_2(through: u64, history: Option<&[TimelineSwitch]>) -> Plan {
    let state = complete_with(|f| {
        f.delivered = Some(Delivered {
            timeline: 1,
            through: Lsn(through),
        })
    });
    let routes = routes();
    let configured = Configured {
        timeline: Some(TimelineNow {
            timeline: 2,
            history,
            delivered: None,
        }),
        ..configured(SnapshotMode::Initial, &routes)
    };
    plan_startup(&state, Some(&reserved()), &configured, SYSTEM)
}

#[test]
fn a_timeline_that_left_at_or_after_the_bound_is_the_same_history() {
    let history = [TimelineSwitch {
        timeline: 1,
        switch_point: Lsn(0x3000),
    }];
    for through in [0x2FFF, 0x3000] {
        let plan = on_timeline_2(through, Some(&history));
        assert_eq!(
            plan.action,
            Action::Stream,
            "{through:#x}: {:?}",
            plan.trace
        );
        assert!(plan.warnings.is_empty());
    }
}

#[test]
fn a_timeline_that_left_before_the_bound_or_not_from_it_is_a_fork() {
    let left_early = [TimelineSwitch {
        timeline: 1,
        switch_point: Lsn(0x3000),
    }];
    let elsewhere = [TimelineSwitch {
        timeline: 3,
        switch_point: Lsn(0x1000),
    }];
    let recopy = Action::Snapshot {
        drop_slot: true,
        leftovers: Leftovers::Retract,
    };
    for (through, history) in [
        (0x3001, Some(&left_early[..])),
        (0x2000, Some(&elsewhere[..])),
        (0x2000, None),
    ] {
        let plan = on_timeline_2(through, history);
        assert_eq!(plan.action, recopy, "{through:#x} {history:?}");
        assert_eq!(plan.warnings.len(), 1, "{:?}", plan.warnings);
        assert!(plan.warnings[0].contains("timeline"), "{:?}", plan.warnings);
    }
    rule!(
        "state complete + the server's timeline 2 left timeline 1 at 0/3000, before what Feldera may hold (up to 0/3001): a fork: drop the slot, copy again, retract leftovers",
        on_timeline_2(0x3001, Some(&left_early))
    );
}

#[test]
fn a_file_without_a_bound_is_not_judged_by_timeline() {
    let routes = routes();
    let configured = Configured {
        timeline: Some(TimelineNow {
            timeline: 2,
            history: None,
            delivered: None,
        }),
        ..configured(SnapshotMode::Initial, &routes)
    };
    let plan = plan_startup(&complete(), Some(&reserved()), &configured, SYSTEM);
    assert_eq!(plan.action, Action::Stream);
}
