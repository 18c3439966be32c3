use super::*;
use crate::wire::framing::Framer;
use crate::wire::testing::{encode_backend, frame, pg_error};

fn parse_bytes(bytes: &[u8]) -> Result<BackendMessage, DecodeError> {
    let mut framer = Framer::new();
    framer.push(bytes);
    let frame = framer.next_frame()?.expect("a whole frame");
    assert_eq!(framer.buffered_len(), 0);
    BackendMessage::parse(&frame)
}

fn every_kind() -> Vec<BackendMessage> {
    let mut full_error = pg_error("ERROR", "23505", "duplicate key");
    full_error.severity_nonlocalized = Some("ERROR".into());
    full_error.detail = Some("Key (id)=(1) already exists.".into());
    full_error.hint = Some("h".into());
    full_error.position = Some(3);
    full_error.internal_position = Some(4);
    full_error.internal_query = Some("q".into());
    full_error.where_ = Some("w".into());
    full_error.schema = Some("public".into());
    full_error.table = Some("t".into());
    full_error.column = Some("c".into());
    full_error.data_type = Some("d".into());
    full_error.constraint = Some("t_pkey".into());
    full_error.file = Some("nbtinsert.c".into());
    full_error.line = Some(666);
    full_error.routine = Some("_bt_check_unique".into());
    vec![
        BackendMessage::Authentication(Authentication::Ok),
        BackendMessage::Authentication(Authentication::CleartextPassword),
        BackendMessage::Authentication(Authentication::Md5Password { salt: [1, 2, 3, 4] }),
        BackendMessage::Authentication(Authentication::Sasl {
            mechanisms: vec!["SCRAM-SHA-256-PLUS".into(), "SCRAM-SHA-256".into()],
        }),
        BackendMessage::Authentication(Authentication::SaslContinue(Bytes::from_static(
            b"r=abc,s=c2FsdA==,i=4096",
        ))),
        BackendMessage::Authentication(Authentication::SaslFinal(Bytes::from_static(b"v=xyz"))),
        BackendMessage::Authentication(Authentication::Unsupported {
            code: 7,
            method: "GSSAPI",
        }),
        BackendMessage::ParameterStatus {
            name: "TimeZone".into(),
            value: "UTC".into(),
        },
        BackendMessage::BackendKeyData(BackendKeyData {
            process_id: 4242,
            secret_key: Bytes::from_static(&[9, 8, 7, 6]),
        }),
        BackendMessage::ReadyForQuery(TransactionStatus::Idle),
        BackendMessage::ReadyForQuery(TransactionStatus::InTransaction),
        BackendMessage::ReadyForQuery(TransactionStatus::Failed),
        BackendMessage::RowDescription(RowDescription {
            fields: vec![
                FieldDescription {
                    name: "id".into(),
                    table_oid: 16384,
                    column_id: 1,
                    type_oid: 23,
                    type_size: 4,
                    type_modifier: -1,
                    format: 0,
                },
                FieldDescription {
                    name: "naïve".into(),
                    table_oid: 0,
                    column_id: 0,
                    type_oid: 25,
                    type_size: -1,
                    type_modifier: -1,
                    format: 0,
                },
            ],
        }),
        BackendMessage::DataRow(DataRow {
            columns: vec![Some(Bytes::from_static(b"1")), None, Some(Bytes::new())],
        }),
        BackendMessage::CommandComplete {
            tag: "SELECT 1".into(),
        },
        BackendMessage::EmptyQueryResponse,
        BackendMessage::ErrorResponse(Box::new(full_error)),
        BackendMessage::NoticeResponse(Box::new(pg_error("NOTICE", "00000", "hello"))),
        BackendMessage::NotificationResponse(Notification {
            process_id: 7,
            channel: "chan".into(),
            payload: "payload".into(),
        }),
        BackendMessage::CopyInResponse(CopyResponse {
            format: 0,
            column_formats: vec![0, 0],
        }),
        BackendMessage::CopyOutResponse(CopyResponse {
            format: 0,
            column_formats: vec![0, 0, 0],
        }),
        BackendMessage::CopyBothResponse(CopyResponse {
            format: 0,
            column_formats: vec![],
        }),
        BackendMessage::CopyData(Bytes::from_static(b"1\tone\n")),
        BackendMessage::CopyDone,
        BackendMessage::ParseComplete,
        BackendMessage::BindComplete,
        BackendMessage::CloseComplete,
        BackendMessage::NoData,
        BackendMessage::PortalSuspended,
    ]
}

#[test]
fn every_backend_message_kind_round_trips_through_the_test_encoder() {
    for message in every_kind() {
        assert_eq!(parse_bytes(&encode_backend(&message)).unwrap(), message);
    }
}

#[test]
fn data_row_values_are_slices_of_the_frame() {
    let mut framer = Framer::new();
    framer.push(&frame(b'D', &[0, 1, 0, 0, 0, 3, b'a', b'b', b'c']));
    let frame = framer.next_frame().unwrap().unwrap();
    let BackendMessage::DataRow(row) = BackendMessage::parse(&frame).unwrap() else {
        panic!("expected DataRow");
    };
    let value = row.columns[0].as_ref().unwrap();
    assert_eq!(value.as_ptr(), frame.body[6..].as_ptr());
}

#[test]
fn hand_written_bytes_parse_as_the_manual_describes() {
    // AuthenticationMD5Password: 'R', length 12, Int32(5), 4 salt bytes.
    assert_eq!(
        parse_bytes(b"R\0\0\0\x0c\0\0\0\x05\xde\xad\xbe\xef").unwrap(),
        BackendMessage::Authentication(Authentication::Md5Password {
            salt: [0xde, 0xad, 0xbe, 0xef]
        })
    );
    // CopyBothResponse for START_REPLICATION: text format, zero columns.
    assert_eq!(
        parse_bytes(b"W\0\0\0\x07\0\0\0").unwrap(),
        BackendMessage::CopyBothResponse(CopyResponse {
            format: 0,
            column_formats: vec![]
        })
    );
    assert_eq!(
        parse_bytes(b"Z\0\0\0\x05I").unwrap(),
        BackendMessage::ReadyForQuery(TransactionStatus::Idle)
    );
}

#[test]
fn unknown_tags_and_codes_are_errors_naming_what_is_accepted() {
    let err = parse_bytes(&frame(b'?', b"")).unwrap_err();
    assert_eq!(err.offset, 0);
    assert!(matches!(
        err.kind,
        DecodeErrorKind::UnknownTag { tag: b'?', .. }
    ));

    let err = parse_bytes(&frame(b'R', &[0, 0, 0, 99])).unwrap_err();
    assert_eq!(err.offset, 5);
    assert!(err.to_string().contains("SASL"), "{err}");

    let err = parse_bytes(&frame(b'Z', b"X")).unwrap_err();
    assert_eq!(err.offset, 5);
    assert!(err.to_string().contains("I, T or E"), "{err}");
}

#[test]
fn malformed_bodies_are_errors_with_frame_offsets() {
    // DataRow claiming a 100-byte value with 1 byte present.
    let err = parse_bytes(&frame(b'D', &[0, 1, 0, 0, 0, 100, b'x'])).unwrap_err();
    assert_eq!(err.offset, 7);
    assert!(matches!(
        err.kind,
        DecodeErrorKind::BadLength { declared: 100, .. }
    ));
    // Negative value length other than -1.
    let err = parse_bytes(&frame(b'D', &[0, 1, 0xFF, 0xFF, 0xFF, 0xFE])).unwrap_err();
    assert!(matches!(
        err.kind,
        DecodeErrorKind::BadLength { declared: -2, .. }
    ));
    // Negative column count.
    let err = parse_bytes(&frame(b'D', &[0xFF, 0xFF])).unwrap_err();
    assert!(matches!(
        err.kind,
        DecodeErrorKind::BadLength { declared: -1, .. }
    ));
    // A huge column count with no columns behind it fails on the first missing column.
    let err = parse_bytes(&frame(b'D', &[0x7F, 0xFF])).unwrap_err();
    assert!(matches!(err.kind, DecodeErrorKind::UnexpectedEof { .. }));
    // Trailing bytes after ReadyForQuery's status.
    let err = parse_bytes(&frame(b'Z', b"II")).unwrap_err();
    assert_eq!(err.kind, DecodeErrorKind::TrailingBytes { count: 1 });
    // CopyOutResponse with format 2.
    let err = parse_bytes(&frame(b'H', &[2, 0, 0])).unwrap_err();
    assert!(err.to_string().contains("0 (text) and 1 (binary)"), "{err}");
    // BackendKeyData with a 2-byte key.
    let err = parse_bytes(&frame(b'K', &[0, 0, 0, 1, 0, 0])).unwrap_err();
    assert!(err.to_string().contains("4 to 256"), "{err}");
    // Empty-bodied messages refuse a body.
    let err = parse_bytes(&frame(b'c', b"x")).unwrap_err();
    assert_eq!(err.kind, DecodeErrorKind::TrailingBytes { count: 1 });
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_bodies_never_panic(tag: u8, body in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = parse_bytes(&frame(tag, &body));
        }
    }
}
