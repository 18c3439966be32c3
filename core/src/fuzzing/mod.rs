//! Harness functions for the cargo-fuzz targets. They live here so that ordinary builds and
//! `cargo test` compile them and replay the committed seed corpora (`fuzz/seeds/<target>`).
//!
//! Each harness is total: any input returns normally. A panic means a decoder broke its
//! contract (panicked, or violated a property asserted here), which is what the fuzzer
//! looks for. This module owns only the glue between decoders, and (in `pipeline`) a fake
//! world around the whole `Pipeline`; it decides nothing about a stream and never touches
//! I/O.

use std::fmt::Write as _;

use bytes::Bytes;

use crate::conn::{Connection, ConnectionConfig, Event};
use crate::pgoutput::{self, Message, Relation, RelationCache, Tuple};
use crate::schema::{ColumnType, SqlType};
use crate::value::{self, oid, ValuePlan};
use crate::wire::{BackendMessage, Frame, Framer, ReplicationMessage};

mod pipeline;
pub use pipeline::{pipeline, pipeline_traced, run_pipeline, PipelineRun};

/// Frame cap for the framed-stream harness: real frames in the seeds are far smaller, and a
/// small cap keeps the fuzzer from spending its time growing buffers toward 1 GiB.
const FUZZ_MAX_FRAME_LEN: u32 = 1 << 20;

/// A whole backend byte stream as it arrives after `START_REPLICATION`.
///
/// Input: one byte that seeds the chunk sizes, then the stream. The stream is framed twice,
/// once pushed whole and once pushed in chunks (sizes from a tiny generator seeded by the
/// first byte; `0` means one chunk): both must yield the same frames and the same error.
/// Every frame is parsed as a backend message; CopyData payloads as replication messages;
/// XLogData payloads as pgoutput messages, checked against a relation cache, and the values
/// of every row decoded through value plans chosen for the relation's column types.
pub fn framed_stream(data: &[u8]) {
    let Some((&chunk_seed, stream)) = data.split_first() else {
        return;
    };
    let whole = frames_of(stream, &[stream.len()]);
    let chunked = frames_of(stream, &chunk_sizes(chunk_seed, stream.len()));
    assert_eq!(whole, chunked, "chunking changed the frames");
    let mut stream_state = StreamState::default();
    for frame in &whole.0 {
        stream_state.handle_frame(frame);
    }
}

/// pgoutput payloads, each preceded by a big-endian u16 length (see `pgoutput::fuzz`).
pub fn pgoutput(data: &[u8]) {
    pgoutput::fuzz::fuzz_pgoutput(data);
}

/// One COPY text row: the first byte picks the column count (see `copy::fuzz_copy_row`).
pub fn copy_row(data: &[u8]) {
    crate::copy::fuzz_copy_row(data);
}

/// Type OIDs the value harness picks from by index: every family of the mapping table,
/// arrays of several element types, and an OID no decoder knows (an enum, say).
pub const VALUE_OIDS: [u32; 32] = [
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
    oid::CHAR,
    oid::BYTEA,
    oid::DATE,
    oid::TIME,
    oid::TIMESTAMP,
    oid::TIMESTAMPTZ,
    oid::UUID,
    oid::JSON,
    oid::JSONB,
    oid::INTERVAL,
    oid::TIMETZ,
    1000,   // _bool
    1007,   // _int4
    1016,   // _int8
    1009,   // _text
    1231,   // _numeric
    1185,   // _timestamptz
    3807,   // _jsonb
    1001,   // _bytea
    16_384, // a user type
];

/// One value text. Input: a byte that picks the type from [`VALUE_OIDS`], a byte that picks
/// the Feldera column type (`value::fuzz::column_type`), then the text. A written value must
/// be one JSON value on one line; a refusal must leave the buffer as it was; NULL must be
/// accepted exactly when the column is nullable. The same input also runs through
/// `value::fuzz::fuzz_value`, which picks types from its own list.
pub fn value_text(data: &[u8]) {
    value::fuzz::fuzz_value(data);
    let [pick_type, pick_target, text @ ..] = data else {
        return;
    };
    let Some(&pg_type) = VALUE_OIDS.get(usize::from(*pick_type) % VALUE_OIDS.len()) else {
        return;
    };
    let types = value::PgTypes::new();
    let Ok(plan) = value::plan(&types, pg_type, &value::fuzz::column_type(*pick_target)) else {
        return;
    };
    let prefix = b"{\"v\":";
    let mut out = prefix.to_vec();
    match plan.write_json(text, &mut out) {
        Ok(()) => {
            out.push(b'}');
            assert!(!out.contains(&b'\n'), "a value broke the NDJSON line");
            if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&out) {
                panic!("invalid JSON {:?}: {e}", String::from_utf8_lossy(&out));
            }
        }
        Err(err) => {
            assert_eq!(out, prefix, "a refused value left bytes behind");
            let _ = err.to_string();
        }
    }
    let mut null_out = Vec::new();
    assert_eq!(plan.write_null(&mut null_out).is_ok(), plan.target.nullable);
}

/// One body given to every Feldera answer parser under every status.
pub fn feldera_responses(data: &[u8]) {
    crate::feldera::fuzz::fuzz_feldera_responses(data);
}

/// Arbitrary server bytes into a replication [`Connection`]: startup, then a
/// `START_REPLICATION` query and its stream.
///
/// Input: one byte for chunk sizes, a big-endian u16 `split`, then the server's bytes. The
/// first `split` bytes are fed, then (if the connection is ready) the query is sent, then the
/// rest is fed. Commands happen only at that boundary, so the events cannot depend on how
/// the bytes were chunked: the run with one chunk per segment and the run with generated
/// chunk sizes must report the same events. The machine must never panic and must report
/// nothing after `Failed`.
pub fn conn_machine(data: &[u8]) {
    let [chunk_seed, split_hi, split_lo, server @ ..] = data else {
        return;
    };
    let split = usize::from(u16::from_be_bytes([*split_hi, *split_lo])).min(server.len());
    let (startup, stream) = server.split_at(split);
    let whole = conn_events(startup, stream, 0);
    let chunked = conn_events(startup, stream, *chunk_seed);
    assert_eq!(whole, chunked, "chunking changed the connection's events");
}

/// The events of a replication connection fed `startup`, then asked for
/// `START_REPLICATION` if ready, then fed `stream`, then end of stream; chunk sizes come
/// from `chunk_seed` (see [`chunk_sizes`]).
pub fn conn_events(startup: &[u8], stream: &[u8], chunk_seed: u8) -> Vec<Event> {
    let config = ConnectionConfig {
        user: "fuzz".into(),
        database: "fuzz".into(),
        password: Some(crate::conn::Password::new("fuzz")),
        application_name: "slotline-fuzz".into(),
        replication: true,
        encryption: crate::conn::Encryption::Plain,
        keepalive: None,
    };
    let Ok(mut conn) = Connection::new(config) else {
        panic!("a valid configuration was refused");
    };
    let mut events = Vec::new();
    feed(&mut conn, startup, chunk_seed, &mut events);
    if conn.phase() == crate::conn::Phase::Ready {
        let sent = conn.query("START_REPLICATION SLOT s LOGICAL 0/0 (proto_version '1')");
        assert!(sent.is_ok(), "a ready connection refused a query: {sent:?}");
    }
    feed(&mut conn, stream, chunk_seed, &mut events);
    conn.handle_eof();
    drain(&mut conn, &mut events);
    events
}

fn feed(conn: &mut Connection, bytes: &[u8], chunk_seed: u8, events: &mut Vec<Event>) {
    for chunk in chunks(bytes, &chunk_sizes(chunk_seed, bytes.len())) {
        conn.handle_bytes(chunk);
        drain(conn, events);
    }
}

/// Drains transmit and events as the drive contract requires; nothing may follow Failed.
fn drain(conn: &mut Connection, events: &mut Vec<Event>) {
    while conn.poll_transmit().is_some() {}
    while let Some(event) = conn.poll_event() {
        if let Some(Event::Failed(err)) = events.last() {
            panic!("{event:?} followed Failed({err:?})");
        }
        events.push(event);
    }
}

/// Chunk sizes from a seed: `0` gives one chunk; otherwise a xorshift sequence of sizes in
/// `1..=4 * seed`, covering single bytes, frame-sized and header-splitting chunks.
pub fn chunk_sizes(seed: u8, total: usize) -> Vec<usize> {
    if seed == 0 {
        return vec![total];
    }
    let mut state = u32::from(seed) | 0x9E37_7900;
    let max = usize::from(seed) * 4;
    let mut sizes = Vec::new();
    let mut covered = 0;
    while covered < total {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let size = (state as usize % max) + 1;
        sizes.push(size);
        covered += size;
    }
    sizes
}

/// `data` cut into pieces of the given sizes (the last piece takes what is left).
fn chunks<'d>(data: &'d [u8], sizes: &[usize]) -> Vec<&'d [u8]> {
    let mut out = Vec::with_capacity(sizes.len());
    let mut rest = data;
    for &size in sizes {
        let (chunk, next) = rest.split_at(size.min(rest.len()));
        out.push(chunk);
        rest = next;
    }
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// The frames of a stream pushed in chunks, and the framing error that ended it, if any.
type Framed = (Vec<Frame>, Option<crate::DecodeError>);

fn frames_of(stream: &[u8], sizes: &[usize]) -> Framed {
    let mut framer = Framer::with_max_frame_len(FUZZ_MAX_FRAME_LEN);
    let mut frames = Vec::new();
    for chunk in chunks(stream, sizes) {
        framer.push(chunk);
        loop {
            match framer.next_frame() {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(err) => {
                    // Errors latch: asking again must give the same one.
                    assert_eq!(framer.next_frame(), Err(err.clone()));
                    return (frames, Some(err));
                }
            }
        }
    }
    (frames, None)
}

/// What the decode path keeps between frames: the relations and their value plans.
#[derive(Default)]
struct StreamState {
    cache: RelationCache,
    /// Value plans per relation OID, one per column, rebuilt whenever a Relation arrives.
    plans: std::collections::BTreeMap<u32, Vec<ValuePlan>>,
    line: Vec<u8>,
}

impl StreamState {
    fn handle_frame(&mut self, frame: &Frame) {
        let Ok(message) = BackendMessage::parse(frame) else {
            return;
        };
        let _ = message.name();
        if let BackendMessage::CopyData(payload) = message {
            self.handle_copy_data(&payload);
        }
    }

    fn handle_copy_data(&mut self, payload: &Bytes) {
        let Ok(ReplicationMessage::XLogData(xlog)) = ReplicationMessage::parse(payload) else {
            return;
        };
        let Ok(message) = pgoutput::parse(&xlog.data) else {
            return;
        };
        let mut shown = String::new();
        assert!(write!(shown, "{}", self.cache.display(&message)).is_ok());
        if let Message::Relation(relation) = &message {
            self.plans.insert(relation.oid, plans_for(relation));
            self.cache.apply(relation.clone());
            return;
        }
        let Ok(Some(relation)) = self.cache.check(&message) else {
            return;
        };
        let oid = relation.oid;
        match &message {
            Message::Insert(insert) => self.write_row(oid, &insert.new),
            Message::Update(update) => {
                if let Some(old) = &update.old {
                    self.write_row(oid, &old.tuple);
                }
                self.write_row(oid, &update.new_filled_from_old());
            }
            Message::Delete(delete) => self.write_row(oid, &delete.old.tuple),
            _ => {}
        }
    }

    /// Encodes a row as one JSON array line (one element per column, as the pipeline
    /// encodes values) and checks it is JSON on one line.
    fn write_row(&mut self, oid: u32, tuple: &Tuple<'_>) {
        let Some(plans) = self.plans.get(&oid) else {
            return;
        };
        self.line.clear();
        self.line.push(b'[');
        for (index, (plan, datum)) in plans.iter().zip(tuple.iter()).enumerate() {
            if index > 0 {
                self.line.push(b',');
            }
            let start = self.line.len();
            let written = match datum {
                pgoutput::Datum::Text(text) | pgoutput::Datum::Binary(text) => {
                    plan.write_json(text, &mut self.line)
                }
                pgoutput::Datum::Null => plan.write_null(&mut self.line),
                pgoutput::Datum::Unchanged => {
                    self.line.extend_from_slice(b"\"u\"");
                    Ok(())
                }
            };
            if written.is_err() {
                assert_eq!(self.line.len(), start, "a refused value left bytes behind");
                self.line.extend_from_slice(b"\"refused\"");
            }
        }
        self.line.push(b']');
        assert!(!self.line.contains(&b'\n'), "a row broke the NDJSON line");
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(&self.line) {
            panic!(
                "invalid JSON {:?}: {e}",
                String::from_utf8_lossy(&self.line)
            );
        }
    }
}

/// One value plan per column: the Feldera type `ddl` would declare for the column
/// (`value::suggest`); columns whose pair has no plan fall back to VARCHAR (every type maps to it). The
/// stream carries no catalog, so types outside the builtins are only ever VARCHAR here.
fn plans_for(relation: &Relation) -> Vec<ValuePlan> {
    let types = value::PgTypes::new();
    relation
        .columns
        .iter()
        .map(|column| {
            let nullable = !column.in_replica_identity;
            let varchar = ColumnType::new(SqlType::Varchar, true);
            value::plan(
                &types,
                column.type_oid,
                &value::suggest::suggest(&types, column.type_oid, -1, 0, nullable).target,
            )
            .or_else(|_| value::plan(&types, column.type_oid, &varchar))
            .unwrap_or_else(|e| panic!("every type must map to VARCHAR: {e}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes_cover_the_stream_and_zero_means_whole() {
        assert_eq!(chunk_sizes(0, 10), [10]);
        for seed in 1..=255u8 {
            let sizes = chunk_sizes(seed, 1000);
            assert!(sizes.iter().sum::<usize>() >= 1000);
            assert!(sizes
                .iter()
                .all(|&s| (1..=usize::from(seed) * 4).contains(&s)));
        }
        assert!(chunk_sizes(1, 50).iter().all(|&s| s <= 4));
    }

    #[test]
    fn chunks_cut_at_the_given_sizes_and_keep_every_byte() {
        let data = b"abcdefghij";
        assert_eq!(chunks(data, &[3, 3]), [&b"abc"[..], b"def", b"ghij"]);
        assert_eq!(chunks(data, &[20]), [&b"abcdefghij"[..]]);
        assert_eq!(chunks(b"", &[0]), [&b""[..]]);
    }

    #[test]
    fn harnesses_accept_empty_and_tiny_inputs() {
        for data in [&b""[..], b"\0", b"\x01", b"\xff\xff"] {
            framed_stream(data);
            pgoutput(data);
            copy_row(data);
            value_text(data);
            feldera_responses(data);
            conn_machine(data);
            pipeline(data);
        }
    }

    #[test]
    fn a_four_gib_frame_header_is_refused_in_every_chunking() {
        let mut data = vec![7u8, b'd', 0xff, 0xff, 0xff, 0xff];
        data.extend_from_slice(&[0; 64]);
        framed_stream(&data);
        let (frames, err) = frames_of(&data[1..], &[1; 70]);
        assert!(frames.is_empty());
        assert_eq!(err.map(|e| e.offset), Some(1));
    }
}
