//! Parser tests from bytes written by hand after the manual's "Logical Replication Message
//! Formats" (protocol 1), independent of `encode`; plus the totality properties.

use super::*;
use crate::error::DecodeErrorKind;
use crate::lsn::Lsn;
use crate::time::PgTime;
use smallvec::smallvec;

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

const LSN_1A2B3C: [u8; 8] = [0, 0, 0, 0, 0, 0x1A, 0x2B, 0x3C];
const LSN_1_0: [u8; 8] = [0, 0, 0, 1, 0, 0, 0, 0];
/// 1,000,000 µs after 2000-01-01.
const TIME_1S: [u8; 8] = [0, 0, 0, 0, 0, 0x0F, 0x42, 0x40];
const OID_16384: [u8; 4] = [0, 0, 0x40, 0x00];

/// Relation 16384 `public.users`, identity default: id int4 (key), name varchar(64),
/// bio text.
fn users_relation_bytes() -> Vec<u8> {
    cat(&[
        b"R",
        &OID_16384,
        b"public\0users\0",
        b"d",
        &[0, 3],
        &[1],
        b"id\0",
        &[0, 0, 0, 23],
        &[0xFF, 0xFF, 0xFF, 0xFF],
        &[0],
        b"name\0",
        &[0, 0, 0x04, 0x13],
        &[0, 0, 0, 68],
        &[0],
        b"bio\0",
        &[0, 0, 0, 25],
        &[0xFF, 0xFF, 0xFF, 0xFF],
    ])
}

/// TupleData `[t:"1", n, u]`.
const TUPLE_1_N_U: &[u8] = &[0, 3, b't', 0, 0, 0, 1, b'1', b'n', b'u'];
/// TupleData `[t:"1", n, n]` (a `K` image: non-key columns null).
const TUPLE_KEY_1: &[u8] = &[0, 3, b't', 0, 0, 0, 1, b'1', b'n', b'n'];
/// TupleData `[t:"2", t:"ann", t:"x"]`.
const TUPLE_2_ANN_X: &[u8] = &[
    0, 3, b't', 0, 0, 0, 1, b'2', b't', 0, 0, 0, 3, b'a', b'n', b'n', b't', 0, 0, 0, 1, b'x',
];

fn update_bytes(old: Option<(u8, &[u8])>, new: &[u8]) -> Vec<u8> {
    let mut out = cat(&[b"U", &OID_16384]);
    if let Some((tag, tuple)) = old {
        out.push(tag);
        out.extend_from_slice(tuple);
    }
    out.push(b'N');
    out.extend_from_slice(new);
    out
}

/// One valid payload of every message kind (and every tuple part), for the properties.
fn valid_payloads() -> Vec<Vec<u8>> {
    vec![
        cat(&[b"B", &LSN_1A2B3C, &TIME_1S, &[0, 0, 0x02, 0xDE]]),
        cat(&[b"C", &[0], &LSN_1A2B3C, &LSN_1_0, &TIME_1S]),
        cat(&[b"O", &LSN_1A2B3C, b"node_a\0"]),
        users_relation_bytes(),
        cat(&[b"Y", &[0, 0, 0x40, 0x06], b"public\0mood\0"]),
        cat(&[b"I", &OID_16384, b"N", TUPLE_1_N_U]),
        update_bytes(None, TUPLE_1_N_U),
        update_bytes(Some((b'K', TUPLE_KEY_1)), TUPLE_2_ANN_X),
        update_bytes(Some((b'O', TUPLE_2_ANN_X)), TUPLE_1_N_U),
        cat(&[b"D", &OID_16384, b"K", TUPLE_KEY_1]),
        cat(&[b"D", &OID_16384, b"O", TUPLE_2_ANN_X]),
        cat(&[b"T", &[0, 0, 0, 2], &[3], &OID_16384, &[0, 0, 0x40, 0x01]]),
        cat(&[b"M", &[1], &LSN_1A2B3C, b"app\0", &[0, 0, 0, 2], b"hi"]),
        cat(&[
            b"I",
            &OID_16384,
            b"N",
            &[0, 1, b'b', 0, 0, 0, 2, 0xDE, 0xAD],
        ]),
    ]
}

#[test]
fn begin_carries_final_lsn_commit_time_and_xid() {
    let bytes = cat(&[b"B", &LSN_1A2B3C, &TIME_1S, &[0, 0, 0x02, 0xDE]]);
    let expected = Begin {
        final_lsn: Lsn(0x1A2B3C),
        commit_time: PgTime(1_000_000),
        xid: 734,
    };
    assert_eq!(parse(&bytes).unwrap(), Message::Begin(expected));
}

#[test]
fn xid_is_unsigned() {
    let bytes = cat(&[b"B", &LSN_1A2B3C, &TIME_1S, &[0xFF, 0xFF, 0xFF, 0xFE]]);
    let Message::Begin(begin) = parse(&bytes).unwrap() else {
        panic!("not a Begin")
    };
    assert_eq!(begin.xid, 4_294_967_294);
}

#[test]
fn commit_carries_flags_commit_lsn_end_lsn_and_time_in_that_order() {
    let bytes = cat(&[b"C", &[0], &LSN_1A2B3C, &LSN_1_0, &TIME_1S]);
    let expected = Commit {
        flags: 0,
        commit_lsn: Lsn(0x1A2B3C),
        end_lsn: Lsn(0x1_0000_0000),
        commit_time: PgTime(1_000_000),
    };
    assert_eq!(parse(&bytes).unwrap(), Message::Commit(expected));
}

#[test]
fn origin_carries_commit_lsn_then_name() {
    let bytes = cat(&[b"O", &LSN_1A2B3C, b"node_a\0"]);
    let expected = Origin {
        commit_lsn: Lsn(0x1A2B3C),
        name: "node_a",
    };
    assert_eq!(parse(&bytes).unwrap(), Message::Origin(expected));
}

#[test]
fn relation_carries_identity_and_columns_with_key_flag_type_and_typmod() {
    let Message::Relation(relation) = parse(&users_relation_bytes()).unwrap() else {
        panic!("not a Relation")
    };
    let column = |key: bool, name: &str, type_oid: u32, type_modifier: i32| RelationColumn {
        in_replica_identity: key,
        name: name.to_owned(),
        type_oid,
        type_modifier,
    };
    let expected = Relation {
        oid: 16384,
        namespace: "public".to_owned(),
        name: "users".to_owned(),
        replica_identity: ReplicaIdentity::Default,
        columns: vec![
            column(true, "id", 23, -1),
            column(false, "name", 1043, 68),
            column(false, "bio", 25, -1),
        ],
    };
    assert_eq!(relation, expected);
}

#[test]
fn relation_identity_bytes_map_to_settings() {
    for (byte, expected) in [
        (b'd', ReplicaIdentity::Default),
        (b'n', ReplicaIdentity::Nothing),
        (b'f', ReplicaIdentity::Full),
        (b'i', ReplicaIdentity::Index),
    ] {
        let bytes = cat(&[b"R", &OID_16384, b"\0t\0", &[byte], &[0, 0]]);
        let Message::Relation(relation) = parse(&bytes).unwrap() else {
            panic!("not a Relation")
        };
        assert_eq!(relation.replica_identity, expected);
        assert!(relation.columns.is_empty());
        assert_eq!(relation.qualified_name(), "pg_catalog.t");
    }
}

#[test]
fn relation_with_unknown_identity_byte_is_refused_at_that_byte() {
    let bytes = cat(&[b"R", &OID_16384, b"public\0t\0", b"x", &[0, 0]]);
    let err = parse(&bytes).unwrap_err();
    assert_eq!(err.offset, 14);
    assert!(matches!(
        err.kind,
        DecodeErrorKind::UnknownTag { tag: b'x', .. }
    ));
}

#[test]
fn relation_names_must_be_utf8() {
    let bytes = cat(&[b"R", &OID_16384, b"p\xFFx\0t\0", b"d", &[0, 0]]);
    let err = parse(&bytes).unwrap_err();
    assert_eq!((err.offset, err.kind), (5, DecodeErrorKind::InvalidUtf8));
    let bytes = cat(&[
        b"R",
        &OID_16384,
        b"public\0t\0d",
        &[0, 1, 0],
        b"\xC3(\0",
        &[0, 0, 0, 23, 0, 0, 0, 0],
    ]);
    assert_eq!(
        parse(&bytes).unwrap_err().kind,
        DecodeErrorKind::InvalidUtf8
    );
}

#[test]
fn relation_column_flags_other_than_key_are_refused() {
    let bytes = cat(&[
        b"R",
        &OID_16384,
        b"public\0t\0d",
        &[0, 1, 2],
        b"id\0",
        &[0, 0, 0, 23, 0, 0, 0, 0],
    ]);
    let err = parse(&bytes).unwrap_err();
    assert_eq!(err.offset, 17);
    assert!(matches!(&err.kind, DecodeErrorKind::Protocol(m) if m.contains("0x02")));
}

#[test]
fn type_carries_oid_namespace_and_name() {
    let bytes = cat(&[b"Y", &[0, 0, 0x40, 0x06], b"public\0mood\0"]);
    let expected = TypeMessage {
        oid: 16390,
        namespace: "public",
        name: "mood",
    };
    assert_eq!(parse(&bytes).unwrap(), Message::Type(expected));
}

#[test]
fn insert_tuple_distinguishes_text_null_unchanged_and_binary() {
    let bytes = cat(&[
        b"I",
        &OID_16384,
        b"N",
        &[0, 4],
        &[b't', 0, 0, 0, 2],
        b"42",
        b"n",
        b"u",
        &[b'b', 0, 0, 0, 0],
    ]);
    let Message::Insert(insert) = parse(&bytes).unwrap() else {
        panic!("not an Insert")
    };
    assert_eq!(insert.relation_oid, 16384);
    let expected: &[Datum<'_>] = &[
        Datum::Text(b"42"),
        Datum::Null,
        Datum::Unchanged,
        Datum::Binary(b""),
    ];
    assert_eq!(insert.new.columns.as_slice(), expected);
    assert!(insert.new.has_unchanged());
}

#[test]
fn tuple_values_borrow_from_the_payload() {
    let bytes = cat(&[b"I", &OID_16384, b"N", &[0, 1, b't', 0, 0, 0, 3], b"abc"]);
    let Message::Insert(insert) = parse(&bytes).unwrap() else {
        panic!("not an Insert")
    };
    let value = insert.new.get(0).and_then(|d| d.bytes()).unwrap();
    assert!(std::ptr::eq(value.as_ptr(), &bytes[bytes.len() - 3]));
}

#[test]
fn update_without_old_image_means_key_unchanged() {
    let bytes = update_bytes(None, TUPLE_1_N_U);
    let Message::Update(update) = parse(&bytes).unwrap() else {
        panic!("not an Update")
    };
    assert_eq!(update.old, None);
    assert_eq!(update.key_changed_per_message(), Some(false));
    assert_eq!(update.new.len(), 3);
    // No old row: the hole stays a hole.
    assert_eq!(update.new_filled_from_old().get(2), Some(&Datum::Unchanged));
}

#[test]
fn update_with_k_image_means_key_changed() {
    let bytes = update_bytes(Some((b'K', TUPLE_KEY_1)), TUPLE_2_ANN_X);
    let Message::Update(update) = parse(&bytes).unwrap() else {
        panic!("not an Update")
    };
    assert_eq!(update.old_kind(), Some(OldKind::Key));
    assert_eq!(update.key_changed_per_message(), Some(true));
    let old = update.old.as_ref().unwrap();
    assert_eq!(
        old.tuple.columns.as_slice(),
        &[Datum::Text(b"1"), Datum::Null, Datum::Null]
    );
    assert_eq!(update.new.get(1), Some(&Datum::Text(b"ann")));
}

#[test]
fn update_with_o_image_leaves_key_change_to_the_caller_and_fills_holes() {
    let bytes = update_bytes(Some((b'O', TUPLE_2_ANN_X)), TUPLE_1_N_U);
    let Message::Update(update) = parse(&bytes).unwrap() else {
        panic!("not an Update")
    };
    assert_eq!(update.old_kind(), Some(OldKind::Row));
    assert_eq!(update.key_changed_per_message(), None);
    let filled = update.new_filled_from_old();
    // The null stays null (it is a value); only the `u` hole takes the old value.
    assert_eq!(
        filled.columns.as_slice(),
        &[Datum::Text(b"1"), Datum::Null, Datum::Text(b"x")]
    );
}

#[test]
fn update_whose_images_differ_in_width_is_refused() {
    let bytes = update_bytes(Some((b'O', &[0, 1, b'n'])), TUPLE_1_N_U);
    let err = parse(&bytes).unwrap_err();
    // U, OID (4), O, [count 1, n], N: the new tuple starts at byte 10.
    assert_eq!(err.offset, 10);
    assert!(
        matches!(&err.kind, DecodeErrorKind::Protocol(m) if m.contains("1 columns") && m.contains("has 3"))
    );
}

#[test]
fn update_with_two_old_images_or_missing_new_is_refused() {
    let mut bytes = cat(&[b"U", &OID_16384, b"K", TUPLE_KEY_1, b"O", TUPLE_KEY_1]);
    let err = parse(&bytes).unwrap_err();
    assert!(matches!(
        err.kind,
        DecodeErrorKind::UnknownTag { tag: b'O', .. }
    ));
    assert_eq!(err.offset, 16);
    bytes.truncate(16);
    assert!(matches!(
        parse(&bytes).unwrap_err().kind,
        DecodeErrorKind::UnexpectedEof { needed: 1 }
    ));
}

#[test]
fn delete_carries_key_or_old_row() {
    let bytes = cat(&[b"D", &OID_16384, b"K", TUPLE_KEY_1]);
    let Message::Delete(delete) = parse(&bytes).unwrap() else {
        panic!("not a Delete")
    };
    assert_eq!(delete.old.kind, OldKind::Key);
    assert_eq!(delete.old.tuple.get(0), Some(&Datum::Text(b"1")));
    let bytes = cat(&[b"D", &OID_16384, b"O", TUPLE_2_ANN_X]);
    let Message::Delete(delete) = parse(&bytes).unwrap() else {
        panic!("not a Delete")
    };
    assert_eq!(delete.old.kind, OldKind::Row);
    assert_eq!(delete.old.tuple.get(2), Some(&Datum::Text(b"x")));
}

#[test]
fn delete_with_new_tuple_marker_is_refused() {
    let err = parse(&cat(&[b"D", &OID_16384, b"N", TUPLE_KEY_1])).unwrap_err();
    assert_eq!(err.offset, 5);
    assert!(matches!(
        err.kind,
        DecodeErrorKind::UnknownTag { tag: b'N', .. }
    ));
}

#[test]
fn truncate_carries_options_and_relation_oids() {
    for (bits, cascade, restart_identity) in [
        (0, false, false),
        (1, true, false),
        (2, false, true),
        (3, true, true),
    ] {
        let bytes = cat(&[
            b"T",
            &[0, 0, 0, 2],
            &[bits],
            &OID_16384,
            &[0, 0, 0x40, 0x01],
        ]);
        let expected = Truncate {
            cascade,
            restart_identity,
            relation_oids: smallvec![16384, 16385],
        };
        assert_eq!(parse(&bytes).unwrap(), Message::Truncate(expected));
    }
}

#[test]
fn truncate_with_undefined_option_bits_is_refused() {
    let err = parse(&cat(&[b"T", &[0, 0, 0, 1], &[4], &OID_16384])).unwrap_err();
    assert_eq!(err.offset, 5);
    assert!(matches!(&err.kind, DecodeErrorKind::Protocol(m) if m.contains("CASCADE")));
}

#[test]
fn logical_message_carries_flag_lsn_prefix_and_content() {
    let bytes = cat(&[b"M", &[1], &LSN_1A2B3C, b"app\0", &[0, 0, 0, 2], b"hi"]);
    let expected = LogicalMessage {
        transactional: true,
        lsn: Lsn(0x1A2B3C),
        prefix: "app",
        content: b"hi",
    };
    assert_eq!(parse(&bytes).unwrap(), Message::Logical(expected));
    let bytes = cat(&[b"M", &[2], &LSN_1A2B3C, b"app\0", &[0, 0, 0, 0]]);
    assert_eq!(parse(&bytes).unwrap_err().offset, 1);
}

#[test]
fn streaming_and_two_phase_tags_are_refused_naming_the_protocol() {
    for tag in [b'S', b'E', b'c', b'A', b'b', b'P', b'K', b'r', b'p'] {
        let err = parse(&[tag, 0, 0, 0, 0]).unwrap_err();
        assert_eq!(err.offset, 0);
        let DecodeErrorKind::UnknownTag { context, tag: got } = err.kind else {
            panic!("{err}")
        };
        assert_eq!(got, tag);
        assert!(context.contains("protocol 2"), "{context}");
    }
}

#[test]
fn unknown_tags_are_refused_listing_the_accepted_ones() {
    let err = parse(b"Z").unwrap_err();
    assert!(
        err.to_string().contains("B, C, O, R, Y, I, U, D, T or M"),
        "{err}"
    );
    let err = parse(&cat(&[b"I", &OID_16384, b"N", &[0, 1, b'x']])).unwrap_err();
    assert_eq!(err.offset, 8);
    assert!(err.to_string().contains("n, u, t or b"), "{err}");
}

#[test]
fn empty_payload_is_an_error() {
    assert_eq!(
        parse(&[]).unwrap_err().kind,
        DecodeErrorKind::UnexpectedEof { needed: 1 }
    );
}

#[test]
fn trailing_bytes_after_any_message_are_refused() {
    for payload in valid_payloads() {
        let mut longer = payload.clone();
        longer.push(0);
        let err = parse(&longer).unwrap_err();
        assert_eq!(
            (err.offset, err.kind),
            (payload.len(), DecodeErrorKind::TrailingBytes { count: 1 })
        );
    }
}

#[test]
fn every_truncation_of_a_valid_message_is_an_error() {
    for payload in valid_payloads() {
        assert!(parse(&payload).is_ok(), "{payload:?}");
        for cut in 0..payload.len() {
            let err = parse(&payload[..cut]).unwrap_err();
            assert!(err.offset <= cut, "offset {} past cut {cut}", err.offset);
        }
    }
}

#[test]
fn huge_or_negative_counts_are_refused_before_reading_on() {
    // 32767 tuple columns declared with 3 bytes left: each column needs at least one.
    let err = parse(&cat(&[b"I", &OID_16384, b"N", &[0x7F, 0xFF], b"nnn"])).unwrap_err();
    assert_eq!(err.offset, 6);
    assert_eq!(
        err.kind,
        DecodeErrorKind::BadLength {
            declared: 32767,
            limit: 3
        }
    );
    let err = parse(&cat(&[b"I", &OID_16384, b"N", &[0xFF, 0xFF]])).unwrap_err();
    assert!(matches!(
        err.kind,
        DecodeErrorKind::BadLength { declared: -1, .. }
    ));
    // Relation columns need at least 10 bytes each.
    let err = parse(&cat(&[b"R", &OID_16384, b"\0t\0d", &[0x7F, 0xFF]])).unwrap_err();
    assert!(matches!(
        err.kind,
        DecodeErrorKind::BadLength {
            declared: 32767,
            limit: 0
        }
    ));
    // Truncate OIDs need 4 bytes each.
    let err = parse(&cat(&[b"T", &[0x7F, 0xFF, 0xFF, 0xFF], &[0], &OID_16384])).unwrap_err();
    assert_eq!(err.offset, 1);
    assert!(matches!(
        err.kind,
        DecodeErrorKind::BadLength { limit: 1, .. }
    ));
    let err = parse(&cat(&[b"T", &[0x80, 0, 0, 0], &[0]])).unwrap_err();
    assert!(matches!(
        err.kind,
        DecodeErrorKind::BadLength {
            declared: -2147483648,
            ..
        }
    ));
}

#[test]
fn huge_or_negative_value_lengths_are_refused() {
    let err = parse(&cat(&[
        b"I",
        &OID_16384,
        b"N",
        &[0, 1, b't', 0x7F, 0xFF, 0xFF, 0xFF],
        b"ab",
    ]))
    .unwrap_err();
    assert_eq!(err.offset, 9);
    assert_eq!(
        err.kind,
        DecodeErrorKind::BadLength {
            declared: i64::from(i32::MAX),
            limit: 2
        }
    );
    // pgoutput marks null with `n`, never with length -1.
    let err = parse(&cat(&[
        b"I",
        &OID_16384,
        b"N",
        &[0, 1, b't', 0xFF, 0xFF, 0xFF, 0xFF],
    ]))
    .unwrap_err();
    assert!(matches!(
        err.kind,
        DecodeErrorKind::BadLength { declared: -1, .. }
    ));
    let err = parse(&cat(&[b"M", &[0], &LSN_1A2B3C, b"p\0", &[0x7F, 0, 0, 0]])).unwrap_err();
    assert!(matches!(err.kind, DecodeErrorKind::BadLength { .. }));
}

#[test]
fn wide_tuples_spill_past_the_inline_capacity() {
    let count = TUPLE_INLINE_COLUMNS + 5;
    let mut bytes = cat(&[b"I", &OID_16384, b"N"]);
    bytes.extend_from_slice(&u16::try_from(count).unwrap().to_be_bytes());
    bytes.extend(std::iter::repeat_n(b'n', count));
    let Message::Insert(insert) = parse(&bytes).unwrap() else {
        panic!("not an Insert")
    };
    assert_eq!(insert.new.len(), count);
    assert!(insert.new.iter().all(Datum::is_null));
}
