//! Fuzz seeds derived from the real capture, written to `fuzz/seeds/<target>/capture-*`
//! when the fixture is regenerated (or with `SLOTLINE_REGENERATE_SEEDS=1`). Hand-written
//! seeds in the same directories (other names) are left alone.
//!
//! Values longer than `MAX_SEED_VALUE` bytes (the TOAST bodies) are cut before re-encoding,
//! so every seed stays small while keeping the real message layouts.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use slotline_core::copy::encode_row;
use slotline_core::fuzzing::VALUE_OIDS;
use slotline_core::pgoutput::encode::encode;
use slotline_core::pgoutput::{self, Datum, Delete, Insert, Message, OldTuple, Tuple, Update};
use slotline_core::schema::{ColumnType, SqlType};
use slotline_core::value::{self, fuzz::column_type, PgTypes};
use slotline_core::wire::testing::frame;
use slotline_core::wire::Frame;

use super::decode::{frames, JsonDecoder};

const MAX_SEED_VALUE: usize = 64;
/// Chunk-size seeds for the stream harnesses: whole, single bytes, and a few others.
const CHUNK_SEEDS: [u8; 6] = [0, 1, 5, 17, 64, 255];

fn seed_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/seeds")
        .join(target)
}

/// Replaces the `capture-*` seeds of every target with ones derived from `stream`.
pub fn write_all(stream: &[u8]) {
    for (target, seeds) in derive(stream) {
        replace(target, &seeds);
    }
}

/// Panics unless the committed `capture-*` seeds are exactly what `stream` derives to.
pub fn check_all(stream: &[u8]) {
    for (target, seeds) in derive(stream) {
        let expected: BTreeSet<Vec<u8>> = seeds.into_iter().collect();
        let committed: BTreeSet<Vec<u8>> = std::fs::read_dir(seed_dir(target))
            .expect("seed directory")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("capture-"))
            .map(|e| std::fs::read(e.path()).expect("read seed"))
            .collect();
        assert!(
            committed == expected,
            "fuzz/seeds/{target} is stale: regenerate with SLOTLINE_REGENERATE_SEEDS=1"
        );
    }
}

/// The seeds of each target derived from `stream`.
fn derive(stream: &[u8]) -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let frames = frames(stream, []);
    let transactions = transactions(&frames);
    let mut framed = Vec::new();
    let mut payloads = Vec::new();
    for (i, tx) in transactions.iter().enumerate() {
        let chunk_seed = CHUNK_SEEDS[i % CHUNK_SEEDS.len()];
        let mut bytes = vec![chunk_seed];
        bytes.extend(tx.iter().flat_map(|f| f.wire.clone()));
        framed.push(bytes);
        let mut prefixed = Vec::new();
        for f in tx {
            if let Some(payload) = &f.payload {
                let len = u16::try_from(payload.len()).expect("shortened payloads are small");
                prefixed.extend_from_slice(&len.to_be_bytes());
                prefixed.extend_from_slice(payload);
            }
        }
        payloads.push(prefixed);
    }
    let whole: Vec<u8> = transactions
        .iter()
        .flatten()
        .flat_map(|f| f.wire.clone())
        .collect();
    framed.push([&[3u8][..], &whole].concat());
    payloads.push(
        transactions
            .iter()
            .flatten()
            .filter_map(|f| f.payload.as_ref())
            .flat_map(|p| [&(p.len() as u16).to_be_bytes()[..], p].concat())
            .collect(),
    );
    let (copy_rows, values) = row_seeds(&frames);
    vec![
        ("framed_stream", framed),
        ("pgoutput", payloads),
        ("conn_machine", conn_seeds(&transactions)),
        ("copy_row", copy_rows),
        ("value_text", values),
        (
            "feldera_responses",
            vec![super::decode::SCHEMA_JSON.to_vec()],
        ),
    ]
}

fn replace(target: &str, seeds: &[Vec<u8>]) {
    let dir = seed_dir(target);
    std::fs::create_dir_all(&dir).expect("seed directory");
    for entry in std::fs::read_dir(&dir)
        .expect("read seed directory")
        .flatten()
    {
        if entry.file_name().to_string_lossy().starts_with("capture-") {
            std::fs::remove_file(entry.path()).expect("remove an old seed");
        }
    }
    let unique: BTreeSet<&Vec<u8>> = seeds.iter().collect();
    for (i, seed) in unique.into_iter().enumerate() {
        std::fs::write(dir.join(format!("capture-{i:03}")), seed).expect("write seed");
    }
}

/// A frame of the capture, shortened: its bytes on the wire and its pgoutput payload.
struct SeedFrame {
    wire: Vec<u8>,
    payload: Option<Vec<u8>>,
}

/// The capture's frames grouped by transaction (a group ends at a Commit or at a
/// non-transactional message), with long values cut.
fn transactions(frames: &[Frame]) -> Vec<Vec<SeedFrame>> {
    let mut groups = Vec::new();
    let mut current = Vec::new();
    for f in frames {
        let is_xlog = f.tag == b'd' && f.body.first() == Some(&b'w');
        let Some(data) = f.body.get(25..).filter(|_| is_xlog) else {
            current.push(SeedFrame {
                wire: frame_bytes(f),
                payload: None,
            });
            continue;
        };
        let message = pgoutput::parse(data).expect("a pgoutput message");
        let payload = encode(&shorten(&message));
        let mut body = f.body[..25].to_vec();
        body.extend_from_slice(&payload);
        let ends = matches!(message, Message::Commit(_))
            || matches!(message, Message::Logical(m) if !m.transactional);
        current.push(SeedFrame {
            wire: frame(b'd', &body),
            payload: Some(payload),
        });
        if ends {
            groups.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        groups.push(current);
    }
    groups
}

fn frame_bytes(f: &Frame) -> Vec<u8> {
    frame(f.tag, &f.body)
}

fn shorten_tuple<'a>(tuple: &Tuple<'a>) -> Tuple<'a> {
    tuple
        .iter()
        .map(|datum| match datum {
            Datum::Text(text) if text.len() > MAX_SEED_VALUE => {
                Datum::Text(&text[..MAX_SEED_VALUE])
            }
            other => *other,
        })
        .collect()
}

fn shorten<'a>(message: &Message<'a>) -> Message<'a> {
    let old = |old: &OldTuple<'a>| OldTuple {
        kind: old.kind,
        tuple: shorten_tuple(&old.tuple),
    };
    match message {
        Message::Insert(m) => Message::Insert(Insert {
            relation_oid: m.relation_oid,
            new: shorten_tuple(&m.new),
        }),
        Message::Update(m) => Message::Update(Update {
            relation_oid: m.relation_oid,
            old: m.old.as_ref().map(old),
            new: shorten_tuple(&m.new),
        }),
        Message::Delete(m) => Message::Delete(Delete {
            relation_oid: m.relation_oid,
            old: old(&m.old),
        }),
        other => other.clone(),
    }
}

/// A server conversation for `conn_machine`: trust startup, then the stream's first
/// transactions (the harness sends START_REPLICATION between the two).
fn conn_seeds(transactions: &[Vec<SeedFrame>]) -> Vec<Vec<u8>> {
    let startup = trust_startup();
    let mut seeds = Vec::new();
    let mut stream = Vec::new();
    for (i, tx) in transactions.iter().take(6).enumerate() {
        stream.extend(tx.iter().flat_map(|f| f.wire.clone()));
        let chunk_seed = CHUNK_SEEDS[i % CHUNK_SEEDS.len()];
        let split = u16::try_from(startup.len()).expect("a short startup");
        seeds.push([&[chunk_seed][..], &split.to_be_bytes(), &startup, &stream].concat());
    }
    seeds
}

/// COPY rows (every row image re-encoded as `COPY ... TO STDOUT` prints it; at most 8
/// fields, the harness's limit) and value texts (each non-null value with its column's
/// PostgreSQL type and a column type like the fixture schema's).
fn row_seeds(frames: &[Frame]) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut decoder = JsonDecoder::new();
    let mut relations = std::collections::BTreeMap::new();
    let mut copy_rows = Vec::new();
    let mut values = Vec::new();
    for frame in frames {
        let Some(data) = frame
            .body
            .get(25..)
            .filter(|_| frame.tag == b'd' && frame.body[0] == b'w')
        else {
            continue;
        };
        let message = pgoutput::parse(data).expect("a pgoutput message");
        decoder.line(&message);
        if let Message::Relation(r) = &message {
            relations.insert(r.oid, r.clone());
        }
        let Some(oid) = message.row_relation_oid() else {
            continue;
        };
        let tuples: Vec<Tuple<'_>> = match &shorten(&message) {
            Message::Insert(m) => vec![m.new.clone()],
            Message::Update(m) => m
                .old
                .iter()
                .map(|o| o.tuple.clone())
                .chain([m.new.clone()])
                .collect(),
            Message::Delete(m) => vec![m.old.tuple.clone()],
            _ => vec![],
        };
        let relation = &relations[&oid];
        let mapping = decoder.mapping(oid);
        for tuple in tuples.iter().filter(|t| !t.has_unchanged()) {
            let fields: Vec<Option<&[u8]>> = tuple.iter().take(8).map(|d| d.bytes()).collect();
            let mut row = vec![fields.len() as u8];
            row.extend(encode_row(&fields));
            copy_rows.push(row);
            for (column, datum) in relation.columns.iter().zip(tuple.iter()) {
                let Some(text) = datum.bytes() else { continue };
                let target = mapping
                    .fields
                    .iter()
                    .find(|f| f.name.matches(&column.name))
                    .map(|f| f.source.as_ref().expect("mapped").plan.target.sql)
                    .unwrap_or(SqlType::Varchar);
                values.push(value_seed(column.type_oid, target, text));
            }
        }
    }
    (copy_rows, values)
}

/// `[type index][column type byte][text]` for `fuzzing::value_text`: the type's index in
/// `VALUE_OIDS` (user types use the last, unknown OID) and the first column-type byte with
/// the same SQL type that can be planned for it.
fn value_seed(pg_type: u32, target: SqlType, text: &[u8]) -> Vec<u8> {
    let known = if pg_type < 10_000 { pg_type } else { 16_384 };
    let index = VALUE_OIDS
        .iter()
        .position(|&o| o == known)
        .unwrap_or(VALUE_OIDS.len() - 1);
    let planned = |b: &u8| {
        let ty: ColumnType = column_type(*b);
        ty.sql == target
            && ty.nullable
            && value::plan(&PgTypes::new(), VALUE_OIDS[index], &ty).is_ok()
    };
    let byte = (0..=255u8)
        .find(planned)
        .or_else(|| (0..=255u8).find(|b| column_type(*b).sql == SqlType::Varchar))
        .expect("some byte picks VARCHAR");
    [&[index as u8, byte][..], text].concat()
}

/// What a server sends to a trusted replication client up to ReadyForQuery.
pub fn trust_startup() -> Vec<u8> {
    let mut startup = frame(b'R', &0u32.to_be_bytes());
    startup.extend(frame(b'S', b"DateStyle\0ISO, MDY\0"));
    startup.extend(frame(b'S', b"TimeZone\0UTC\0"));
    startup.extend(frame(b'K', &[0, 0, 0, 42, 1, 2, 3, 4]));
    startup.extend(frame(b'Z', b"I"));
    startup
}
