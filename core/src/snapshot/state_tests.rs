use super::*;
use proptest::prelude::*;

fn complete() -> StateFile {
    StateFile {
        version: FORMAT_VERSION,
        system_id: "7301234567890123456".into(),
        database: "app".into(),
        slot: "slotline_shop".into(),
        publication: "slotline_pub".into(),
        pipeline: "shop".into(),
        routes: vec![
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
                source: "\"Sales\".\"Items\"".into(),
                target: "\"LineItems\"".into(),
                phase: None,
                consistent_point: None,
                published: None,
                leaves: Vec::new(),
                oid: None,
                copied_through: None,
            },
        ],
        phase: SnapshotPhase::Complete,
        consistent_point: Some(Lsn(0x16_B374_D848)),
        updated_at: Some("2024-02-29T12:34:56Z".into()),
        feldera_incarnation: None,
        feldera_written_under: None,
        delivered: None,
    }
}

fn pending() -> StateFile {
    StateFile {
        phase: SnapshotPhase::Pending,
        consistent_point: None,
        updated_at: None,
        feldera_incarnation: None,
        feldera_written_under: None,
        delivered: None,
        ..complete()
    }
}

fn text(state: &StateFile) -> String {
    String::from_utf8(state.encode()).unwrap()
}

fn error(text: &str) -> String {
    StateFile::parse(text.as_bytes()).unwrap_err().to_string()
}

/// The encoded complete file with `from` replaced by `to` (which must occur exactly once).
fn edited(from: &str, to: &str) -> String {
    let original = text(&complete());
    assert_eq!(original.matches(from).count(), 1, "{from:?} in\n{original}");
    original.replace(from, to)
}

#[test]
fn encoded_file_is_what_operators_read() {
    insta::with_settings!({
        description => "a state file: pretty JSON, keys in a fixed order, LSN as PostgreSQL prints it, system id as text, trailing newline",
        omit_expression => true,
    }, {
        insta::assert_snapshot!(text(&complete()));
    });
    assert!(text(&complete()).ends_with("}\n"));
}

#[test]
fn pending_file_writes_nulls_rather_than_leaving_keys_out() {
    let pending = text(&pending());
    assert!(pending.contains("\"phase\": \"pending\""), "{pending}");
    assert!(pending.contains("\"consistent_point\": null"), "{pending}");
    assert!(pending.contains("\"updated_at\": null"), "{pending}");
}

#[test]
fn encoding_is_stable() {
    assert_eq!(complete().encode(), complete().encode());
    let parsed = StateFile::parse(&complete().encode()).unwrap();
    assert_eq!(parsed.encode(), complete().encode());
}

#[test]
fn round_trip_keeps_every_field() {
    for state in [complete(), pending()] {
        assert_eq!(StateFile::parse(&state.encode()).unwrap(), state);
    }
}

#[test]
fn compact_and_reordered_json_is_accepted() {
    let compact = r#"{"updated_at":null,"consistent_point":"0/1A0","phase":"complete","routes":[{"target":"t","source":"public.t"}],
        "pipeline":"p","publication":"pub","slot":"s","database":"d","system_id":"1","version":1}"#;
    let state = StateFile::parse(compact.as_bytes()).unwrap();
    assert_eq!(state.consistent_point, Some(Lsn(0x1A0)));
    assert_eq!(state.routes[0].source, "public.t");
}

#[test]
fn an_empty_file_is_an_error_not_an_absence() {
    insta::assert_snapshot!(error(""), @"the file is empty; a state file is one JSON object of format version 1");
    assert_eq!(StateFile::parse(b" \n\t\n").unwrap_err(), StateError::Empty);
}

#[test]
fn invalid_utf8_names_the_byte() {
    let mut bytes = complete().encode();
    bytes[10] = 0xFF;
    let err = StateFile::parse(&bytes).unwrap_err();
    assert_eq!(err, StateError::NotUtf8 { offset: 10 });
    insta::assert_snapshot!(err, @"byte 10 is not UTF-8; a state file is JSON text of format version 1");
}

#[test]
fn a_truncated_file_says_it_was_cut_short() {
    let full = text(&complete());
    insta::assert_snapshot!(error(&full[..full.len() / 2]), @"the JSON stops at line 11, column 4 before it is complete (cut short?); a state file is one whole JSON object of format version 1");
    // Every cut of a valid file is refused (none of them parses as something else).
    for cut in 1..full.trim_end().len() {
        let err = StateFile::parse(&full.as_bytes()[..cut]).unwrap_err();
        assert!(
            matches!(err, StateError::Truncated { .. }),
            "cut at {cut}: {err}"
        );
    }
}

#[test]
fn not_json_names_line_and_column() {
    insta::assert_snapshot!(error("{\n  \"version\": 1,\n  oops\n}"), @"not valid JSON at line 3, column 3: key must be a string; a state file is one JSON object of format version 1");
    insta::assert_snapshot!(error(&format!("{} trailing", text(&complete()))), @"not valid JSON at line 22, column 2: trailing characters; a state file is one JSON object of format version 1");
}

#[test]
fn json_that_is_not_an_object_is_refused() {
    insta::assert_snapshot!(error("[1]"), @"the JSON is an array, not an object; a state file is one JSON object of format version 1");
    insta::assert_snapshot!(error("null"), @"the JSON is null, not an object; a state file is one JSON object of format version 1");
    insta::assert_snapshot!(error("\"complete\""), @"the JSON is a string, not an object; a state file is one JSON object of format version 1");
}

#[test]
fn unknown_versions_are_named_with_the_one_accepted() {
    insta::assert_snapshot!(error(&edited("\"version\": 1", "\"version\": 7")), @"format version 7 is not one this slotline reads (1)");
    insta::assert_snapshot!(error(&edited("\"version\": 1", "\"version\": \"1\"")), @r#"format version "1" is not one this slotline reads (1)"#);
    insta::assert_snapshot!(error(&edited("\"version\": 1", "\"version\": 1.0")), @"format version 1.0 is not one this slotline reads (1)");
    insta::assert_snapshot!(error(&edited("\"version\": 1", "\"version\": 0")), @"format version 0 is not one this slotline reads (1)");
    insta::assert_snapshot!(error(&edited("  \"version\": 1,\n", "")), @r#"the object has no "version"; this slotline reads format version 1"#);
}

#[test]
fn a_newer_version_is_named_before_its_unknown_fields() {
    let newer = edited("\"version\": 1,", "\"version\": 2,\n  \"shards\": 4,");
    assert_eq!(
        StateFile::parse(newer.as_bytes()).unwrap_err(),
        StateError::Version {
            found: Some("2".into())
        }
    );
}

#[test]
fn every_missing_field_is_named() {
    let full = text(&complete());
    let value: serde_json::Value = serde_json::from_str(&full).unwrap();
    for key in value.as_object().unwrap().keys() {
        if key == "version" {
            continue; // a file without a version is not a version-1 file: tested above
        }
        let mut without = value.clone();
        without.as_object_mut().unwrap().remove(key);
        let err = StateFile::parse(without.to_string().as_bytes()).unwrap_err();
        assert_eq!(
            err,
            StateError::Field {
                path: ".".into(),
                problem: format!("missing field `{key}`"),
            },
            "without {key}"
        );
    }
    insta::assert_snapshot!(error(&edited("  \"slot\": \"slotline_shop\",\n", "")), @"missing field `slot`; a state file holds version, system_id, database, slot, publication, pipeline, routes [{source, target, and optionally phase (pending, complete or removed), consistent_point, published (text), leaves [{oid (number), schema, name (text)}], oid (number) and copied_through (a list of text)}], phase (pending or complete), consistent_point (an LSN like 16/B374D848, or null), updated_at (text, or null), and optionally feldera_incarnation (text), feldera_written_under {pipeline_id (text), fault_tolerance (text), initial_start_time (seconds)} and delivered {timeline (number), through (an LSN)}");
}

#[test]
fn unknown_fields_are_refused_with_the_known_ones() {
    insta::assert_snapshot!(error(&edited("\"version\": 1,", "\"version\": 1,\n  \"tables\": [],")), @"unknown field `tables`, expected one of `version`, `system_id`, `database`, `slot`, `publication`, `pipeline`, `routes`, `phase`, `consistent_point`, `updated_at`, `feldera_incarnation`, `feldera_written_under`, `delivered`; a state file holds version, system_id, database, slot, publication, pipeline, routes [{source, target, and optionally phase (pending, complete or removed), consistent_point, published (text), leaves [{oid (number), schema, name (text)}], oid (number) and copied_through (a list of text)}], phase (pending or complete), consistent_point (an LSN like 16/B374D848, or null), updated_at (text, or null), and optionally feldera_incarnation (text), feldera_written_under {pipeline_id (text), fault_tolerance (text), initial_start_time (seconds)} and delivered {timeline (number), through (an LSN)}");
    insta::assert_snapshot!(error(&edited("\"target\": \"users\"", "\"target\": \"users\", \"key\": \"id\"")), @"at routes[0]: unknown field `key`, expected one of `source`, `target`, `phase`, `consistent_point`, `published`, `leaves`, `oid`, `copied_through`; a state file holds version, system_id, database, slot, publication, pipeline, routes [{source, target, and optionally phase (pending, complete or removed), consistent_point, published (text), leaves [{oid (number), schema, name (text)}], oid (number) and copied_through (a list of text)}], phase (pending or complete), consistent_point (an LSN like 16/B374D848, or null), updated_at (text, or null), and optionally feldera_incarnation (text), feldera_written_under {pipeline_id (text), fault_tolerance (text), initial_start_time (seconds)} and delivered {timeline (number), through (an LSN)}");
}

#[test]
fn wrong_types_name_the_field_and_what_it_holds() {
    let problem = |from: &str, to: &str| match StateFile::parse(edited(from, to).as_bytes()) {
        Err(StateError::Field { path, problem }) => format!("{path}: {problem}"),
        other => panic!("{from} -> {to}: {other:?}"),
    };
    insta::assert_snapshot!(problem("\"7301234567890123456\"", "7301234567890123456"), @"system_id: invalid type: integer `7301234567890123456`, expected a string");
    insta::assert_snapshot!(problem("\"complete\"", "\"done\""), @"phase: unknown variant `done`, expected `pending` or `complete`");
    insta::assert_snapshot!(problem("\"16/B374D848\"", "\"16:B374D848\""), @r#"consistent_point: invalid LSN "16:B374D848": expected two hexadecimal numbers of at most 8 digits separated by '/', like 16/B374D848"#);
    insta::assert_snapshot!(problem("\"16/B374D848\"", "97000000000"), @"consistent_point: invalid type: integer `97000000000`, expected a string");
    insta::assert_snapshot!(problem("\"app\"", "null"), @"database: invalid type: null, expected a string");
    insta::assert_snapshot!(problem("\"source\": \"public.users\"", "\"source\": [\"public\", \"users\"]"), @"routes[0].source: invalid type: sequence, expected a string");
    insta::assert_snapshot!(problem("\"2024-02-29T12:34:56Z\"", "1709210096"), @"updated_at: invalid type: integer `1709210096`, expected a string");
}

#[test]
fn a_duplicated_key_is_refused() {
    let twice = edited(
        "\"phase\": \"complete\",",
        "\"phase\": \"pending\",\n  \"phase\": \"complete\",",
    );
    insta::assert_snapshot!(StateFile::parse(twice.as_bytes()).unwrap_err(), @"duplicate field `phase`; a state file holds version, system_id, database, slot, publication, pipeline, routes [{source, target, and optionally phase (pending, complete or removed), consistent_point, published (text), leaves [{oid (number), schema, name (text)}], oid (number) and copied_through (a list of text)}], phase (pending or complete), consistent_point (an LSN like 16/B374D848, or null), updated_at (text, or null), and optionally feldera_incarnation (text), feldera_written_under {pipeline_id (text), fault_tolerance (text), initial_start_time (seconds)} and delivered {timeline (number), through (an LSN)}");
}

#[test]
fn complete_without_a_consistent_point_is_refused() {
    let err = error(&edited("\"16/B374D848\"", "null"));
    insta::assert_snapshot!(err, @"phase is complete but consistent_point is null; a complete copy always records the slot's consistent point (an LSN like 16/B374D848)");
    let pending_without = text(&pending());
    assert!(StateFile::parse(pending_without.as_bytes()).is_ok());
}

#[test]
fn a_read_failure_reports_the_shells_words() {
    insta::assert_snapshot!(
        StateError::Read("Permission denied (os error 13)".into()),
        @"reading it failed: Permission denied (os error 13)"
    );
}

#[test]
fn state_path_joins_dir_and_slot() {
    assert_eq!(
        state_path("./slotline-state", "slotline_shop").unwrap(),
        "./slotline-state/slotline_shop.state.json"
    );
    assert_eq!(
        state_path("/var/lib/sl/", "s1").unwrap(),
        "/var/lib/sl/s1.state.json"
    );
    assert_eq!(state_path("/", "s").unwrap(), "/s.state.json");
    assert_eq!(state_path("", "s").unwrap(), "./s.state.json");
}

#[test]
fn state_path_refuses_what_is_not_a_slot_name() {
    for slot in [
        "",
        "../etc",
        "a/b",
        "a\\b",
        "..",
        "s.json",
        "s\0",
        "é",
        &"a".repeat(64),
    ] {
        let err = state_path("/d", slot).unwrap_err();
        assert_eq!(err.slot, slot);
    }
    insta::assert_snapshot!(state_path("/d", "../x").unwrap_err(), @r#"slot name "../x" cannot name a state file: accepted are 1 to 63 characters from letters, digits and _"#);
}

#[test]
fn rfc3339_renders_utc_whole_seconds() {
    // Expected values from `date -u -d @<unix seconds> +%FT%TZ`.
    let at = |unix_secs: i64| rfc3339_utc(PgTime::from_unix_micros(unix_secs * 1_000_000));
    assert_eq!(rfc3339_utc(PgTime(0)), "2000-01-01T00:00:00Z");
    assert_eq!(at(0), "1970-01-01T00:00:00Z");
    assert_eq!(at(946_684_799), "1999-12-31T23:59:59Z");
    assert_eq!(at(1_709_210_096), "2024-02-29T12:34:56Z");
    assert_eq!(at(4_102_444_799), "2099-12-31T23:59:59Z");
    assert_eq!(at(4_107_542_400), "2100-03-01T00:00:00Z");
    assert_eq!(
        rfc3339_utc(PgTime(1_999_999)),
        "2000-01-01T00:00:01Z",
        "fractions are dropped, not rounded"
    );
    assert_eq!(rfc3339_utc(PgTime(-1)), "1999-12-31T23:59:59Z");
}

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_]{1,12}",
        any::<String>(),
        Just("\"Quoted\".\"Name\"".to_owned())
    ]
}

fn arb_state() -> impl Strategy<Value = StateFile> {
    (
        (arb_text(), arb_text(), arb_text(), arb_text(), arb_text()),
        prop::collection::vec((arb_text(), arb_text()), 0..4),
        any::<bool>(),
        any::<u64>(),
        prop::option::of(arb_text()),
    )
        .prop_map(
            |(
                (system_id, database, slot, publication, pipeline),
                routes,
                done,
                lsn,
                updated_at,
            )| {
                StateFile {
                    version: FORMAT_VERSION,
                    system_id,
                    database,
                    slot,
                    publication,
                    pipeline,
                    routes: routes
                        .into_iter()
                        .map(|(source, target)| StateRoute {
                            source,
                            target,
                            phase: None,
                            consistent_point: None,
                            published: None,
                            leaves: Vec::new(),
                            oid: None,
                            copied_through: None,
                        })
                        .collect(),
                    phase: if done {
                        SnapshotPhase::Complete
                    } else {
                        SnapshotPhase::Pending
                    },
                    consistent_point: (done || lsn % 2 == 0).then_some(Lsn(lsn)),
                    feldera_incarnation: (lsn % 3 == 0).then(|| format!("{lsn:08x}-incarnation")),
                    feldera_written_under: None,
                    delivered: None,
                    updated_at,
                }
            },
        )
}

proptest! {
    #[test]
    fn any_state_round_trips(state in arb_state()) {
        prop_assert_eq!(StateFile::parse(&state.encode()).unwrap(), state);
    }

    #[test]
    fn hostile_bytes_are_an_error_never_a_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = StateFile::parse(&bytes).map(|state| state.encode());
    }

    #[test]
    fn a_damaged_file_never_panics_and_what_parses_is_a_valid_state(
        state in arb_state(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let mut bytes = state.encode();
        let i = at.index(bytes.len());
        bytes[i] = byte;
        if let Ok(parsed) = StateFile::parse(&bytes) {
            prop_assert_eq!(parsed.version, FORMAT_VERSION);
            prop_assert!(parsed.phase == SnapshotPhase::Pending || parsed.consistent_point.is_some());
        }
    }
}

#[test]
fn a_route_s_own_copy_round_trips_and_its_point_goes_only_with_complete() {
    let mut file = complete();
    file.routes[1].phase = Some(RoutePhase::Complete);
    file.routes[1].consistent_point = Some(Lsn(0x16_B374_D900));
    let bytes = file.encode();
    assert_eq!(StateFile::parse(&bytes).unwrap(), file);
    let text = String::from_utf8(bytes).unwrap();
    assert!(
        text.contains("\"phase\": \"complete\",\n      \"consistent_point\": \"16/B374D900\""),
        "{text}"
    );
    let reroute = |phase: &str, point: &str| {
        let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let route = &mut value["routes"][1];
        route["phase"] = serde_json::json!(phase);
        route["consistent_point"] = serde_json::json!(point);
        if phase.is_empty() {
            route.as_object_mut().unwrap().remove("phase");
        }
        if point.is_empty() {
            route.as_object_mut().unwrap().remove("consistent_point");
        }
        StateFile::parse(value.to_string().as_bytes()).map(|_| ())
    };
    assert_eq!(reroute("pending", ""), Ok(()));
    assert_eq!(reroute("removed", ""), Ok(()));
    for (phase, point) in [
        ("complete", ""),
        ("", "1/0"),
        ("pending", "1/0"),
        ("removed", "1/0"),
    ] {
        let error = reroute(phase, point).unwrap_err().to_string();
        assert!(
            error.starts_with("at routes[1]: "),
            "{phase} {point}: {error}"
        );
    }
    assert!(reroute("copied", "")
        .unwrap_err()
        .to_string()
        .contains("unknown variant `copied`"));
}

#[test]
fn routes_with_their_own_phase_are_listed_for_operators() {
    let mut file = complete();
    assert_eq!(file.own_phases(), None);
    file.routes[0].phase = Some(RoutePhase::Removed);
    file.routes[1].phase = Some(RoutePhase::Complete);
    file.routes[1].consistent_point = Some(Lsn(0x3000));
    assert_eq!(
        file.own_phases().as_deref(),
        Some("public.users:users removed, \"Sales\".\"Items\":\"LineItems\" complete at 0/3000")
    );
    file.routes[1].phase = Some(RoutePhase::Pending);
    file.routes[1].consistent_point = None;
    file.routes[1].copied_through = Some(Vec::new());
    assert_eq!(
        file.own_phases().as_deref(),
        Some("public.users:users removed, \"Sales\".\"Items\":\"LineItems\" pending (copying online, no chunk durable yet)")
    );
    file.routes[1].copied_through = Some(vec!["42".into(), "a b".into()]);
    assert!(file
        .own_phases()
        .unwrap()
        .ends_with("pending (copying online, durable through key (42, a b))"));
    // The record round-trips.
    assert_eq!(StateFile::parse(&file.encode()).unwrap(), file);
}

#[test]
fn a_routes_leaves_are_written_in_oid_order_and_a_file_without_them_still_parses() {
    let leaf = |oid: u32, name: &str| StateLeaf {
        oid,
        schema: "public".into(),
        name: name.into(),
    };
    let mut state = complete();
    assert!(state.routes[0].learn_leaves(&[leaf(16402, "users_b"), leaf(16390, "users_a")]));
    assert!(
        !state.routes[0].learn_leaves(&[leaf(16390, "users_a")]),
        "nothing new"
    );
    assert!(
        state.routes[0].learn_leaves(&[leaf(16390, "users_2024")]),
        "a rename is recorded"
    );
    let written = text(&state);
    assert!(
        written.contains(
            "\"leaves\": [\n        {\n          \"oid\": 16390,\n          \"schema\": \"public\",\n          \"name\": \"users_2024\"\n        },\n        {\n          \"oid\": 16402,"
        ),
        "{written}"
    );
    assert_eq!(StateFile::parse(written.as_bytes()).unwrap(), state);
    assert!(
        !text(&complete()).contains("leaves"),
        "no key without leaves"
    );
    assert_eq!(
        StateFile::parse(text(&complete()).as_bytes()).unwrap(),
        complete()
    );
    assert!(
        state.routes[0].bare() == complete().routes[0],
        "leaves are no part of the route"
    );
    let unknown = written.replace(
        "\"schema\": \"public\",",
        "\"schema\": \"public\", \"x\": 1,",
    );
    assert!(StateFile::parse(unknown.as_bytes())
        .unwrap_err()
        .to_string()
        .contains("leaves [{oid (number), schema, name (text)}]"));
}
