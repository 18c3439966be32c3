//! Properties: encode → parse is the identity for every message kind; arbitrary bytes never
//! panic the parser or the fuzz harness; no strict prefix of a message parses.

use proptest::collection::vec;
use proptest::prelude::*;

use super::encode::encode;
use super::fuzz::fuzz_pgoutput;
use super::*;
use crate::lsn::Lsn;
use crate::time::PgTime;

/// Owned storage for an arbitrary message, so a `Message` can borrow from it.
#[derive(Clone, Debug)]
enum Owned {
    Begin(Begin),
    Commit(Commit),
    Origin(u64, String),
    Relation(Relation),
    Type(u32, String, String),
    Insert(u32, Vec<OwnedDatum>),
    Update(u32, Option<(OldKind, Vec<OwnedDatum>)>, Vec<OwnedDatum>),
    Delete(u32, OldKind, Vec<OwnedDatum>),
    Truncate(bool, bool, Vec<u32>),
    Logical(bool, u64, String, Vec<u8>),
}

#[derive(Clone, Debug)]
enum OwnedDatum {
    Null,
    Unchanged,
    Text(Vec<u8>),
    Binary(Vec<u8>),
}

fn tuple(data: &[OwnedDatum]) -> Tuple<'_> {
    data.iter()
        .map(|d| match d {
            OwnedDatum::Null => Datum::Null,
            OwnedDatum::Unchanged => Datum::Unchanged,
            OwnedDatum::Text(b) => Datum::Text(b),
            OwnedDatum::Binary(b) => Datum::Binary(b),
        })
        .collect()
}

impl Owned {
    fn as_message(&self) -> Message<'_> {
        match self {
            Owned::Begin(m) => Message::Begin(*m),
            Owned::Commit(m) => Message::Commit(*m),
            Owned::Origin(lsn, name) => Message::Origin(Origin {
                commit_lsn: Lsn(*lsn),
                name,
            }),
            Owned::Relation(r) => Message::Relation(r.clone()),
            Owned::Type(oid, namespace, name) => Message::Type(TypeMessage {
                oid: *oid,
                namespace,
                name,
            }),
            Owned::Insert(oid, new) => Message::Insert(Insert {
                relation_oid: *oid,
                new: tuple(new),
            }),
            Owned::Update(oid, old, new) => Message::Update(Update {
                relation_oid: *oid,
                old: old.as_ref().map(|(kind, t)| OldTuple {
                    kind: *kind,
                    tuple: tuple(t),
                }),
                new: tuple(new),
            }),
            Owned::Delete(oid, kind, old) => Message::Delete(Delete {
                relation_oid: *oid,
                old: OldTuple {
                    kind: *kind,
                    tuple: tuple(old),
                },
            }),
            Owned::Truncate(cascade, restart_identity, oids) => Message::Truncate(Truncate {
                cascade: *cascade,
                restart_identity: *restart_identity,
                relation_oids: oids.iter().copied().collect(),
            }),
            Owned::Logical(transactional, lsn, prefix, content) => {
                Message::Logical(LogicalMessage {
                    transactional: *transactional,
                    lsn: Lsn(*lsn),
                    prefix,
                    content,
                })
            }
        }
    }
}

fn name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_ é\"]{0,10}"
}

fn datum() -> impl Strategy<Value = OwnedDatum> {
    prop_oneof![
        Just(OwnedDatum::Null),
        Just(OwnedDatum::Unchanged),
        vec(any::<u8>(), 0..40).prop_map(OwnedDatum::Text),
        vec(any::<u8>(), 0..40).prop_map(OwnedDatum::Binary),
    ]
}

fn old_kind() -> impl Strategy<Value = OldKind> {
    prop_oneof![Just(OldKind::Key), Just(OldKind::Row)]
}

fn relation() -> impl Strategy<Value = Relation> {
    let identity = prop_oneof![
        Just(ReplicaIdentity::Default),
        Just(ReplicaIdentity::Nothing),
        Just(ReplicaIdentity::Full),
        Just(ReplicaIdentity::Index),
    ];
    let column = (any::<bool>(), name(), any::<u32>(), any::<i32>()).prop_map(
        |(in_replica_identity, name, type_oid, type_modifier)| RelationColumn {
            in_replica_identity,
            name,
            type_oid,
            type_modifier,
        },
    );
    (any::<u32>(), name(), name(), identity, vec(column, 0..20)).prop_map(
        |(oid, namespace, name, replica_identity, columns)| Relation {
            oid,
            namespace,
            name,
            replica_identity,
            columns,
        },
    )
}

/// An UPDATE whose old image (if any) has the new tuple's width, as the parser requires.
fn update() -> impl Strategy<Value = Owned> {
    (0usize..20).prop_flat_map(|width| {
        (
            any::<u32>(),
            proptest::option::of((old_kind(), vec(datum(), width))),
            vec(datum(), width),
        )
            .prop_map(|(oid, old, new)| Owned::Update(oid, old, new))
    })
}

fn message() -> impl Strategy<Value = Owned> {
    prop_oneof![
        (any::<u64>(), any::<i64>(), any::<u32>()).prop_map(|(l, t, xid)| Owned::Begin(Begin {
            final_lsn: Lsn(l),
            commit_time: PgTime(t),
            xid
        })),
        (any::<u8>(), any::<u64>(), any::<u64>(), any::<i64>()).prop_map(|(flags, c, e, t)| {
            Owned::Commit(Commit {
                flags,
                commit_lsn: Lsn(c),
                end_lsn: Lsn(e),
                commit_time: PgTime(t),
            })
        }),
        (any::<u64>(), name()).prop_map(|(l, n)| Owned::Origin(l, n)),
        relation().prop_map(Owned::Relation),
        (any::<u32>(), name(), name()).prop_map(|(o, ns, n)| Owned::Type(o, ns, n)),
        (any::<u32>(), vec(datum(), 0..40)).prop_map(|(o, t)| Owned::Insert(o, t)),
        update(),
        (any::<u32>(), old_kind(), vec(datum(), 0..20))
            .prop_map(|(o, k, t)| Owned::Delete(o, k, t)),
        (any::<bool>(), any::<bool>(), vec(any::<u32>(), 0..10))
            .prop_map(|(c, r, oids)| Owned::Truncate(c, r, oids)),
        (any::<bool>(), any::<u64>(), name(), vec(any::<u8>(), 0..40))
            .prop_map(|(t, l, p, c)| Owned::Logical(t, l, p, c)),
    ]
}

proptest! {
    #[test]
    fn encode_then_parse_gives_back_the_message(owned in message()) {
        let bytes = encode(&owned.as_message());
        let message = owned.as_message();
        prop_assert_eq!(parse(&bytes), Ok(message));
    }

    #[test]
    fn no_strict_prefix_of_a_message_parses(owned in message(), cut in any::<prop::sample::Index>()) {
        let bytes = encode(&owned.as_message());
        let cut = cut.index(bytes.len());
        prop_assert!(parse(&bytes[..cut]).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_parsed_bytes_reencode_exactly(
        bytes in vec(any::<u8>(), 0..200)
    ) {
        if let Ok(message) = parse(&bytes) {
            prop_assert_eq!(&encode(&message), &bytes);
        }
    }

    #[test]
    fn arbitrary_bytes_with_a_valid_tag_never_panic(
        tag in prop::sample::select(b"BCORYIUDTM".to_vec()),
        body in vec(any::<u8>(), 0..120)
    ) {
        let mut bytes = vec![tag];
        bytes.extend_from_slice(&body);
        let _ = parse(&bytes);
        fuzz_pgoutput(&bytes);
    }

    #[test]
    fn fuzz_harness_survives_streams_of_valid_and_mangled_messages(
        messages in vec(message(), 0..6),
        flip in any::<prop::sample::Index>(),
        value in any::<u8>()
    ) {
        let mut stream = Vec::new();
        for owned in &messages {
            let bytes = encode(&owned.as_message());
            let len = u16::try_from(bytes.len()).unwrap_or(u16::MAX);
            stream.extend_from_slice(&len.to_be_bytes());
            stream.extend_from_slice(&bytes);
        }
        fuzz_pgoutput(&stream);
        if !stream.is_empty() {
            let at = flip.index(stream.len());
            stream[at] = value;
            fuzz_pgoutput(&stream);
        }
    }
}
