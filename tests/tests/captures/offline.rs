//! The committed capture, decoded without a server: what it contains, its snapshots, and
//! that chunking never changes it.

use std::collections::BTreeSet;

use slotline_core::pgoutput::{self, Datum, Message, OldKind, RelationCache};
use slotline_core::value::oid;

use super::decode::{display_lines, frames, item, joined, json_lines, Item, STREAM};

/// Every pgoutput payload of the fixture, in order.
fn payloads() -> Vec<Vec<u8>> {
    frames(STREAM, [])
        .iter()
        .filter_map(|frame| match item(frame) {
            Item::XLog { data, .. } => Some(data),
            _ => None,
        })
        .collect()
}

/// Calls `visit` with every message and the name of the relation it is about (the cache
/// is updated with each Relation before the next message).
fn each_message(mut visit: impl FnMut(&Message<'_>, Option<&str>)) {
    let mut cache = RelationCache::new();
    for payload in payloads() {
        let message = pgoutput::parse(&payload).expect("parses");
        if let Message::Relation(relation) = &message {
            cache.apply(relation.clone());
        }
        let name = message
            .row_relation_oid()
            .or(match &message {
                Message::Relation(r) => Some(r.oid),
                _ => None,
            })
            .and_then(|oid| cache.get(oid))
            .map(|r| r.name.clone());
        visit(&message, name.as_deref());
    }
}

#[test]
fn every_message_is_snapshotted_as_the_relation_cache_displays_it() {
    let lines = display_lines(&frames(STREAM, []));
    assert_eq!(lines.first().map(String::as_str), Some("COPY_BOTH"));
    insta::assert_snapshot!("pg15_stream_messages", joined(&lines));
}

#[test]
fn every_row_is_snapshotted_as_json_through_the_contract_mapping() {
    insta::assert_snapshot!("pg15_stream_json", joined(&json_lines(&frames(STREAM, []))));
}

#[test]
fn the_capture_holds_every_pgoutput_message_kind() {
    let mut tags = BTreeSet::new();
    each_message(|message, _| {
        tags.insert(char::from(message.tag()));
    });
    let all: BTreeSet<char> = "BCORYIUDTM".chars().collect();
    assert_eq!(tags, all);
}

#[test]
fn the_all_types_relation_has_a_column_for_every_row_of_the_mapping_table() {
    let mut types = BTreeSet::new();
    each_message(|message, name| {
        if let (Message::Relation(r), Some("all_types")) = (message, name) {
            types.extend(r.columns.iter().map(|c| c.type_oid));
        }
    });
    let arrays = [1007, 1009];
    for expected in [
        oid::BOOL,
        oid::INT2,
        oid::INT4,
        oid::INT8,
        oid::OID,
        oid::FLOAT4,
        oid::FLOAT8,
        oid::NUMERIC,
        oid::TEXT,
        oid::VARCHAR,
        oid::BPCHAR,
        oid::NAME,
        oid::BYTEA,
        oid::DATE,
        oid::TIME,
        oid::TIMESTAMP,
        oid::TIMESTAMPTZ,
        oid::UUID,
        oid::JSON,
        oid::JSONB,
        oid::INTERVAL,
    ]
    .into_iter()
    .chain(arrays)
    {
        assert!(types.contains(&expected), "no column of type {expected}");
    }
    assert!(
        types.iter().any(|&t| t >= 16_384),
        "no user-defined (enum) column"
    );
}

fn text_len(datum: Option<&Datum<'_>>) -> Option<usize> {
    datum.and_then(Datum::bytes).map(<[u8]>::len)
}

#[test]
fn toast_updates_send_a_hole_under_default_and_the_old_value_under_full() {
    let mut seen = Vec::new();
    each_message(|message, name| {
        let Message::Update(u) = message else { return };
        match name {
            Some("toast_default") => {
                assert_eq!(
                    u.old, None,
                    "a non-key update under DEFAULT has no old image"
                );
                assert_eq!(u.new.get(2), Some(&Datum::Unchanged));
                assert_eq!(u.new.get(1), Some(&Datum::Text(b"after")));
                seen.push("default");
            }
            Some("toast_full") => {
                let old = u.old.as_ref().expect("FULL sends the old row");
                assert_eq!(old.kind, OldKind::Row);
                assert_eq!(text_len(old.tuple.get(2)), Some(200_000));
                assert_eq!(u.new.get(2), Some(&Datum::Unchanged));
                assert_eq!(text_len(u.new_filled_from_old().get(2)), Some(200_000));
                seen.push("full");
            }
            _ => {}
        }
    });
    assert_eq!(seen, ["default", "full"]);
}

#[test]
fn a_key_change_sends_the_old_key_and_a_non_key_update_sends_no_old_image() {
    let mut updates = Vec::new();
    each_message(|message, name| {
        if let (Message::Update(u), Some("all_types")) = (message, name) {
            let text = |d: Option<&Datum<'_>>| d.and_then(Datum::bytes).map(<[u8]>::to_vec);
            let old_id = u.old.as_ref().map(|o| (o.kind, text(o.tuple.get(0))));
            updates.push((old_id, text(u.new.get(0)), u.key_changed_per_message()));
        }
    });
    assert_eq!(
        updates,
        [
            (None, Some(b"1".to_vec()), Some(false)),
            (
                Some((OldKind::Key, Some(b"2".to_vec()))),
                Some(b"20".to_vec()),
                Some(true)
            ),
        ]
    );
}

#[test]
fn the_unpublished_table_never_reaches_the_stream() {
    let raw = String::from_utf8_lossy(STREAM);
    assert!(!raw.contains("private_notes"));
    assert!(!raw.contains("never streamed"));
    assert!(!raw.contains("hidden"));
    // Its transaction with a published write still streams that write.
    let mut names = Vec::new();
    each_message(|message, name| {
        if let (Message::Insert(i), Some("events")) = (message, name) {
            names.push(
                String::from_utf8_lossy(i.new.get(1).and_then(Datum::bytes).unwrap_or_default())
                    .into_owned(),
            );
        }
    });
    assert!(
        names.contains(&"beside a private write".to_owned()),
        "{names:?}"
    );
}

#[test]
fn add_column_resends_the_relation_with_the_new_column() {
    let mut widths = Vec::new();
    each_message(|message, name| {
        if let (Message::Relation(r), Some("events")) = (message, name) {
            widths.push(r.columns.iter().map(|c| c.name.clone()).collect::<Vec<_>>());
        }
    });
    assert_eq!(widths.len(), 2, "{widths:?}");
    assert_eq!(widths[0], ["id", "name", "at"]);
    assert_eq!(widths[1], ["id", "name", "at", "source"]);
}

#[test]
fn truncate_origin_and_logical_messages_arrive_as_sent() {
    let mut seen = Vec::new();
    each_message(|message, _| match message {
        Message::Truncate(t) => seen.push(format!(
            "truncate {} cascade={} restart={}",
            t.relation_oids.len(),
            t.cascade,
            t.restart_identity
        )),
        Message::Origin(o) => seen.push(format!("origin {}", o.name)),
        Message::Logical(m) => seen.push(format!(
            "message {} {} {:?}",
            m.transactional, m.prefix, m.content
        )),
        _ => {}
    });
    assert_eq!(
        seen,
        [
            "message true slotline [116, 114, 97, 110, 115, 97, 99, 116, 105, 111, 110, 97, 108, 32, 104, 101, 108, 108, 111]",
            "message false slotline [110, 111, 110, 45, 116, 114, 97, 110, 115, 97, 99, 116, 105, 111, 110, 97, 108, 32, 104, 101, 108, 108, 111]",
            "message true slotline [98, 105, 110, 0, 255, 10]",
            "origin capture_origin",
            "truncate 2 cascade=true restart=true",
            "message true slotline-capture [101, 110, 100]",
        ]
    );
}

/// Cut points: every boundary in the first 2 KiB and around each frame header, and
/// pseudo-random cuts elsewhere (a fixed xorshift: the test is reproducible).
fn cut_points(stream: &[u8]) -> BTreeSet<usize> {
    let mut points: BTreeSet<usize> = (0..=2048.min(stream.len())).collect();
    for frame in frames(stream, []) {
        let start = frame.offset as usize;
        points.extend(start.saturating_sub(2)..(start + 32).min(stream.len() + 1));
    }
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..256 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        points.insert((state % (stream.len() as u64 + 1)) as usize);
    }
    points
}

#[test]
fn whole_bytewise_and_split_feeding_decode_identically() {
    let whole = frames(STREAM, []);
    let expected_display = display_lines(&whole);
    let expected_json = json_lines(&whole);

    let bytewise = frames(STREAM, std::iter::repeat_n(1, STREAM.len()));
    assert_eq!(display_lines(&bytewise), expected_display);
    assert_eq!(json_lines(&bytewise), expected_json);

    // Frames carry the full bodies and their offsets, and decoding is a function of the
    // frames: equal frames at every cut mean identical decoded output.
    for cut in cut_points(STREAM) {
        assert!(
            frames(STREAM, [cut]) == whole,
            "split at byte {cut} changed the frames"
        );
    }
}

/// With `SLOTLINE_REGENERATE_SEEDS=1`, rewrites the `capture-*` fuzz seeds from the
/// committed fixture (the live test does it too when it rewrites the fixture). Otherwise
/// checks that the committed seeds are what the fixture derives to.
#[test]
fn committed_fuzz_seeds_derive_from_the_fixture() {
    if std::env::var_os("SLOTLINE_REGENERATE_SEEDS").is_some() {
        super::seeds::write_all(STREAM);
    }
    super::seeds::check_all(STREAM);
}

/// The whole capture through the core's `Connection` (after a scripted startup), fed in
/// one piece and in small generated chunks, gives the same events: every XLogData and
/// keepalive of the capture, then the end-of-stream failure (the capture stops mid-stream).
#[test]
fn the_connection_reports_the_same_events_however_the_capture_is_chunked() {
    use slotline_core::conn::Event;
    let startup = super::seeds::trust_startup();
    let whole = slotline_core::fuzzing::conn_events(&startup, STREAM, 0);
    let xlog = whole
        .iter()
        .filter(|e| matches!(e, Event::XLogData(_)))
        .count();
    assert_eq!(xlog, payloads().len());
    assert!(whole.iter().any(|e| matches!(e, Event::StreamStarted(_))));
    assert!(
        matches!(
            whole.last(),
            Some(Event::Failed(
                slotline_core::conn::ConnError::ClosedByServer { .. }
            ))
        ),
        "{:?}",
        whole.last()
    );
    for chunk_seed in [1u8, 7, 255] {
        let chunked = slotline_core::fuzzing::conn_events(&startup, STREAM, chunk_seed);
        assert!(
            chunked == whole,
            "chunk seed {chunk_seed} changed the events"
        );
    }
}

/// The framed-stream fuzz harness runs the whole capture (200 KB TOAST values included)
/// through framing, pgoutput, the relation cache and the value plans without objection,
/// fed whole and in small chunks.
#[test]
fn the_framed_stream_harness_accepts_the_whole_capture() {
    for chunk_seed in [0u8, 1, 200] {
        slotline_core::fuzzing::framed_stream(&[&[chunk_seed][..], STREAM].concat());
    }
}

/// Hostile edits of real bytes: each gives a `DecodeError` naming the corrupted field's
/// offset and what was wrong, never a panic and never an allocation of the declared size.
#[test]
fn corrupted_capture_bytes_give_decode_errors_at_the_corrupted_field() {
    use slotline_core::wire::{Framer, MAX_FRAME_LEN};
    use slotline_core::DecodeErrorKind;

    // A frame length of 4 GiB: refused at the length field (one byte after the tag).
    let third = &frames(STREAM, [])[2];
    let mut stream = STREAM.to_vec();
    let at = third.offset as usize;
    stream[at + 1..at + 5].copy_from_slice(&u32::MAX.to_be_bytes());
    let mut framer = Framer::new();
    framer.push(&stream);
    assert!(framer.next_frame().expect("first frame").is_some());
    assert!(framer.next_frame().expect("second frame").is_some());
    let err = framer.next_frame().expect_err("the corrupted length");
    assert_eq!(err.offset, at + 1);
    assert_eq!(
        err.kind,
        DecodeErrorKind::BadLength {
            declared: i64::from(u32::MAX),
            limit: MAX_FRAME_LEN as usize
        }
    );

    // An Insert: 'I', relation oid (4), 'N', column count (i16) at offset 6, then the first
    // datum's kind at 8 and its i32 length at 9.
    let insert = payloads()
        .into_iter()
        .find(|p| p.first() == Some(&b'I'))
        .expect("an Insert");
    let corrupt = |at: usize, bytes: &[u8]| {
        let mut p = insert.clone();
        p[at..at + bytes.len()].copy_from_slice(bytes);
        pgoutput::parse(&p).map(|_| ()).expect_err("corrupted")
    };
    let negative = corrupt(6, &(-1i16).to_be_bytes());
    assert_eq!(negative.offset, 6);
    assert!(matches!(
        negative.kind,
        DecodeErrorKind::BadLength { declared: -1, .. }
    ));
    let too_many = corrupt(6, &i16::MAX.to_be_bytes());
    assert_eq!(too_many.offset, 6);
    assert!(
        matches!(too_many.kind, DecodeErrorKind::BadLength { declared: 32767, limit } if limit < insert.len())
    );
    let huge_value = corrupt(9, &i32::MAX.to_be_bytes());
    assert_eq!(huge_value.offset, 9);
    assert!(
        matches!(huge_value.kind, DecodeErrorKind::BadLength { declared, limit } if declared == i64::from(i32::MAX) && limit < insert.len())
    );
    let bad_kind = corrupt(8, b"x");
    assert_eq!(bad_kind.offset, 8);
    assert!(matches!(
        bad_kind.kind,
        DecodeErrorKind::UnknownTag { tag: b'x', .. }
    ));
}
