//! Decoding a captured replication stream with the core's own pieces, as the pipeline does:
//! `Framer` → `BackendMessage` → `ReplicationMessage` → `pgoutput::parse` + `RelationCache`
//! → `contract::plan_mapping` → `ValuePlan::write_datum`.
//!
//! The fixture `tests/fixtures/pg15-stream.bin` holds every byte the server sent after
//! `START_REPLICATION`, as it framed them (CopyBothResponse first, then CopyData frames),
//! cut after the frame carrying the final marker transaction's Commit. Nothing here talks
//! to a server: the live tests produce the bytes, everything else reads them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use slotline_core::contract::{plan_mapping, ColumnMapping, MappingOptions};
use slotline_core::pgoutput::{
    self, Datum, Message, OldKind, OldTuple, Relation, RelationCache, Tuple,
};
use slotline_core::schema::{parse_program_schema, Schema};
use slotline_core::value::{oid, PgTypes};
use slotline_core::wire::{BackendMessage, Frame, Framer, ReplicationMessage};

use super::final_rows::Row;

pub const FIXTURE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");
pub const STREAM: &[u8] = include_bytes!("../../fixtures/pg15-stream.bin");
pub const SCHEMA_JSON: &[u8] = include_bytes!("../../fixtures/pg15-stream.schema.json");
pub const SETUP_SQL: &str = include_str!("../../fixtures/pg15-stream.setup.sql");
pub const WORKLOAD_SQL: &str = include_str!("../../fixtures/pg15-stream.workload.sql");

/// Prefix and content of the transactional logical message that ends the workload.
pub const END_MARKER: (&str, &[u8]) = ("slotline-capture", b"end");

/// JSON values longer than this are shown as their length and a digest in snapshots.
const SHOWN_JSON_BYTES: usize = 120;

/// The stream cut into frames, pushing it in pieces of the given sizes (the last piece
/// takes the rest). Panics on a framing error: the fixture is a real server's output.
pub fn frames(stream: &[u8], sizes: impl IntoIterator<Item = usize>) -> Vec<Frame> {
    let mut framer = Framer::new();
    let mut out = Vec::new();
    let mut rest = stream;
    let drain = |framer: &mut Framer, out: &mut Vec<Frame>| {
        while let Some(frame) = framer.next_frame().expect("the capture frames cleanly") {
            out.push(frame);
        }
    };
    for size in sizes {
        let (chunk, next) = rest.split_at(size.min(rest.len()));
        framer.push(chunk);
        drain(&mut framer, &mut out);
        rest = next;
    }
    framer.push(rest);
    drain(&mut framer, &mut out);
    assert_eq!(framer.buffered_len(), 0, "the capture ends inside a frame");
    out
}

/// What one frame carried, decoded as far as the protocol goes.
pub enum Item {
    CopyBoth,
    Keepalive {
        wal_end: slotline_core::Lsn,
        reply: bool,
    },
    XLog {
        wal_start: slotline_core::Lsn,
        data: Vec<u8>,
    },
}

pub fn item(frame: &Frame) -> Item {
    match BackendMessage::parse(frame).expect("a backend message") {
        BackendMessage::CopyBothResponse(_) => Item::CopyBoth,
        BackendMessage::CopyData(payload) => {
            match ReplicationMessage::parse(&payload).expect("a replication message") {
                ReplicationMessage::XLogData(x) => Item::XLog {
                    wal_start: x.wal_start,
                    data: x.data.to_vec(),
                },
                ReplicationMessage::Keepalive(k) => Item::Keepalive {
                    wal_end: k.wal_end,
                    reply: k.reply_requested,
                },
            }
        }
        other => panic!("unexpected {} in a replication stream", other.name()),
    }
}

/// Every frame as one line: `RelationCache::display` for pgoutput messages (LSNs, xids and
/// commit times included: this is the fixture's full content, values cut to 32 bytes).
pub fn display_lines(frames: &[Frame]) -> Vec<String> {
    let mut cache = RelationCache::new();
    let mut lines = Vec::new();
    for frame in frames {
        lines.push(match item(frame) {
            Item::CopyBoth => "COPY_BOTH".to_owned(),
            Item::Keepalive { wal_end, reply } => {
                format!("KEEPALIVE wal_end={wal_end} reply={reply}")
            }
            Item::XLog { wal_start, data } => {
                let message = pgoutput::parse(&data).expect("a pgoutput message");
                cache
                    .check(&message)
                    .expect("consistent with its relations");
                let line = format!("XLOG {wal_start} {}", cache.display(&message));
                if let Message::Relation(relation) = &message {
                    cache.apply(relation.clone());
                }
                line
            }
        });
    }
    lines
}

/// The Feldera schema of the fixture tables.
pub fn schema() -> Schema {
    parse_program_schema(SCHEMA_JSON).expect("the schema fixture parses")
}

/// Turns pgoutput messages into JSON lines through the contract's column mappings.
pub struct JsonDecoder {
    schema: Schema,
    cache: RelationCache,
    mappings: BTreeMap<u32, ColumnMapping>,
}

impl JsonDecoder {
    pub fn new() -> JsonDecoder {
        JsonDecoder {
            schema: schema(),
            cache: RelationCache::new(),
            mappings: BTreeMap::new(),
        }
    }

    pub fn mapping(&self, relation_oid: u32) -> &ColumnMapping {
        self.mappings
            .get(&relation_oid)
            .expect("a mapping for every announced relation")
    }

    /// One line per message: no LSNs, xids, times or OIDs, so two captures of the same
    /// workload on different servers give the same lines.
    pub fn line(&mut self, message: &Message<'_>) -> String {
        match message {
            Message::Begin(_) => "BEGIN".to_owned(),
            Message::Commit(_) => "COMMIT".to_owned(),
            Message::Origin(origin) => format!("ORIGIN {}", origin.name),
            Message::Type(ty) => format!("TYPE {}.{}", ty.namespace, ty.name),
            Message::Relation(relation) => self.relation(relation),
            Message::Logical(m) => format!(
                "MESSAGE transactional={} prefix={} content=\"{}\"",
                m.transactional,
                m.prefix,
                m.content.escape_ascii()
            ),
            Message::Truncate(t) => {
                let names: Vec<String> = self
                    .cache
                    .truncated(t)
                    .expect("truncated relations are known")
                    .iter()
                    .map(|r| r.name.clone())
                    .collect();
                format!(
                    "TRUNCATE {} cascade={} restart_identity={}",
                    names.join(", "),
                    t.cascade,
                    t.restart_identity
                )
            }
            Message::Insert(insert) => {
                let table = self.table(insert.relation_oid);
                format!(
                    "INSERT {table} {}",
                    self.row(insert.relation_oid, &insert.new)
                )
            }
            Message::Update(update) => {
                let table = self.table(update.relation_oid);
                let new = self.row(update.relation_oid, &update.new_filled_from_old());
                match &update.old {
                    None => format!("UPDATE {table} new={new}"),
                    Some(old) => {
                        let kind = match old.kind {
                            OldKind::Key => "key",
                            OldKind::Row => "row",
                        };
                        let old = self.old_row(update.relation_oid, old);
                        format!("UPDATE {table} old_{kind}={old} new={new}")
                    }
                }
            }
            Message::Delete(delete) => {
                let table = self.table(delete.relation_oid);
                let old = self.old_row(delete.relation_oid, &delete.old);
                format!("DELETE {table} old={old}")
            }
        }
    }

    fn relation(&mut self, relation: &Relation) -> String {
        let table = self
            .schema
            .inputs
            .iter()
            .find(|t| t.name.matches(&relation.name))
            .unwrap_or_else(|| panic!("no Feldera table for {}", relation.name));
        let mapping = plan_mapping(relation, table, &PgTypes::new(), MappingOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let columns: Vec<String> = relation
            .columns
            .iter()
            .map(|c| {
                // User types get server-assigned OIDs: name them by kind only.
                let ty = if c.type_oid < 10_000 {
                    oid::name(c.type_oid).into_owned()
                } else {
                    "user-type".to_owned()
                };
                let key = if c.in_replica_identity { " key" } else { "" };
                format!("{}:{ty}{key}", c.name)
            })
            .collect();
        let absent: Vec<String> = mapping
            .absent_nullable
            .iter()
            .map(|n| n.to_string())
            .collect();
        let line = format!(
            "RELATION {} identity={} columns=[{}] absent_in_pg=[{}]",
            relation.qualified_name(),
            relation.replica_identity.as_str(),
            columns.join(", "),
            absent.join(", ")
        );
        self.mappings.insert(relation.oid, mapping);
        self.cache.apply(relation.clone());
        line
    }

    fn table(&self, oid: u32) -> String {
        self.mapping(oid).table.to_string()
    }

    /// The row as a JSON object of the mapped fields in schema order. A `u` hole leaves its
    /// field out (what a partial update would send); a value the plan refuses is shown as
    /// `<refused: why>`; a long value as its length and a digest.
    pub fn row(&self, oid: u32, tuple: &Tuple<'_>) -> String {
        let fields: Vec<String> = self
            .row_fields(oid, tuple)
            .1
            .into_iter()
            .filter_map(|(key, value)| Some(format!("{key}:{}", value?)))
            .collect();
        format!("{{{}}}", fields.join(","))
    }

    /// An old image as JSON: a `K` image shows only the replica identity columns (its other
    /// columns are `n` placeholders, not NULL values); an `O` image shows the whole row.
    pub fn old_row(&self, oid: u32, old: &OldTuple<'_>) -> String {
        if old.kind == OldKind::Row {
            return self.row(oid, &old.tuple);
        }
        let relation = self.cache.get(oid).expect("relation announced");
        let identity: Vec<usize> = relation.identity_columns().map(|(i, _)| i).collect();
        let mapping = self.mapping(oid);
        let fields: Vec<String> = mapping
            .fields
            .iter()
            .filter_map(|field| {
                let source = field
                    .source
                    .as_ref()
                    .filter(|s| identity.contains(&s.column))?;
                let datum = old.tuple.get(source.column)?;
                Some(format!(
                    "{}:{}",
                    field.json_key,
                    value_json(&source.plan, datum)
                ))
            })
            .collect();
        format!("{{{}}}", fields.join(","))
    }

    /// The Feldera table name and the row's mapped fields (`None` for a `u` hole).
    pub fn row_fields(&self, oid: u32, tuple: &Tuple<'_>) -> (String, Row) {
        let mapping = self.mapping(oid);
        let row = mapping
            .fields
            .iter()
            .filter_map(|field| {
                let source = field.source.as_ref()?;
                let datum = tuple
                    .get(source.column)
                    .expect("tuple width checked by the cache");
                let value = (!datum.is_unchanged()).then(|| value_json(&source.plan, datum));
                Some((field.json_key.clone(), value))
            })
            .collect();
        (mapping.table.name.clone(), row)
    }
}

/// One datum's JSON through its plan, shortened for display when long.
pub fn value_json(plan: &slotline_core::value::ValuePlan, datum: &Datum<'_>) -> String {
    let mut json = Vec::new();
    let written = match datum {
        Datum::Null => plan.write_null(&mut json),
        Datum::Text(text) => plan.write_json(text, &mut json),
        Datum::Binary(_) | Datum::Unchanged => panic!("no binary or unchanged datum here"),
    };
    match written {
        Err(e) => format!("<refused: {e}>"),
        Ok(()) if json.len() > SHOWN_JSON_BYTES => {
            format!("<{} bytes of JSON, fnv {:016x}>", json.len(), fnv(&json))
        }
        Ok(()) => String::from_utf8(json).expect("JSON is UTF-8"),
    }
}

/// FNV-1a, 64 bits: a stable digest for long values in snapshots.
pub fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The structural lines of a stream: one per pgoutput message, keepalives left out.
pub fn json_lines(frames: &[Frame]) -> Vec<String> {
    let mut decoder = JsonDecoder::new();
    let mut lines = Vec::new();
    for frame in frames {
        if let Item::XLog { data, .. } = item(frame) {
            let message = pgoutput::parse(&data).expect("a pgoutput message");
            lines.push(decoder.line(&message));
        }
    }
    lines
}

/// The length of the stream up to and including the Commit of the transaction carrying the
/// end marker message, or `None` when it has not arrived yet.
pub fn end_of_marker_transaction(stream: &[u8]) -> Option<usize> {
    let mut framer = Framer::new();
    framer.push(stream);
    let mut seen_marker = false;
    while let Ok(Some(frame)) = framer.next_frame() {
        let Item::XLog { data, .. } = item(&frame) else {
            continue;
        };
        let message = pgoutput::parse(&data).expect("a pgoutput message");
        match message {
            Message::Logical(m) if (m.prefix, m.content) == END_MARKER => seen_marker = true,
            Message::Commit(_) if seen_marker => {
                let end = frame.offset as usize + 5 + frame.body.len();
                return Some(end);
            }
            _ => {}
        }
    }
    None
}

/// The SQL of a fixture file cut into psql calls: blank-line separated paragraphs,
/// comment-only paragraphs dropped.
pub fn paragraphs(sql: &str) -> Vec<String> {
    sql.split("\n\n")
        .map(|p| {
            p.lines()
                .filter(|l| !l.trim_start().starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .filter(|p| !p.trim().is_empty())
        .collect()
}

/// The lines as one snapshot body, each ending in a newline.
pub fn joined(lines: &[String]) -> String {
    let mut out = String::new();
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    out
}
