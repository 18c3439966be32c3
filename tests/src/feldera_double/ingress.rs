//! An ingress request body (`format=json`, `update_format=insert_delete`), read piece by
//! piece as it arrives → the changes of each complete valid event plus one parse error per
//! invalid event. Like Feldera, a bad event does not spoil the request: the caller ingests
//! the valid ones and still answers 400. The body is split as Feldera's `lines` parameter
//! says (docs/feldera.md, "Ingress"):
//!
//! - `lines=single`: at newlines, as Feldera's line splitter; a line is handed over as soon
//!   as its newline has arrived and may hold several values, but a value spanning two
//!   lines is an error (Feldera parses each chunk the splitter cut on its own, and the
//!   double cuts at every newline, the finest cut Feldera may make);
//! - `lines=multiple` (Feldera's default): between top-level values, which may span lines;
//!   a value is handed over once it is complete. After a syntax error the double resumes
//!   at the next line (Feldera drops the rest of the chunk, whose size depends on how the
//!   body arrived).
//!
//! So a request's first records can be queued while the rest of its body is still on the
//! wire.
//!
//! Owns: splitting the body into events and numbering them. Never touches state.

use serde_json::{json, Value as Json};

use super::row::{parse_event, Change};
use super::schema::Relation;

/// At most this many errors are listed in a `ParseErrors` body (`num_errors` counts all).
const MAX_LISTED_ERRORS: usize = 1000;
/// The unfinished line (with `lines=multiple`: the unfinished value) may hold at most this much: a test
/// never sends more, and a runaway body must not take the machine's memory.
pub const MAX_UNFINISHED_BYTES: usize = 256 * 1024 * 1024;

/// One rejected event, as Feldera reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub description: String,
    /// 1-based position of the event in the request.
    pub event_number: u64,
    pub field: Option<String>,
    pub invalid_text: Option<String>,
}

/// Feldera's `lines` parameter: how a JSON body is split before it is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    /// Between top-level values, which may span lines (Feldera's default).
    Multiple,
    /// At newlines: no value spans two lines.
    Single,
}

/// How a request's body is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyMode {
    /// `format=json`: events, or with `array` JSON arrays of events, split as `lines` says.
    Json { array: bool, lines: Lines },
    /// `format` absent or `csv`: the double does not parse CSV, so every non-blank line is
    /// a parse error and nothing is ingested. A JSON body sent without `format=json` fails
    /// the same way against real Feldera (as CSV).
    Csv,
    /// A discarding double (`DoubleConfig::with_discard`): nothing is parsed or applied;
    /// each non-blank line counts as one record, so tokens and the request log still tell
    /// how many rows arrived.
    Discard,
}

/// What one piece of a body completed.
#[derive(Debug, Default, PartialEq)]
pub struct Completed {
    pub changes: Vec<Change>,
    /// Records this piece adds to its endpoint's count: the changes, or the lines when
    /// discarding.
    pub records: u64,
}

/// The unfinished line grew past `MAX_UNFINISHED_BYTES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineTooLong;

/// One request body being read.
#[derive(Debug)]
pub struct BodyReader<'a> {
    rel: &'a Relation,
    mode: BodyMode,
    /// Bytes after the last newline seen (in array mode: everything so far).
    unfinished: Vec<u8>,
    /// Events seen, valid or not.
    pub events: u64,
    pub errors: Vec<ParseError>,
}

impl<'a> BodyReader<'a> {
    pub fn new(rel: &'a Relation, mode: BodyMode) -> BodyReader<'a> {
        BodyReader {
            rel,
            mode,
            unfinished: Vec::new(),
            events: 0,
            errors: Vec::new(),
        }
    }

    /// Reads the next piece of the body and returns what the lines (or values) it completed
    /// carry; a line or value split across pieces is read once it is complete.
    pub fn feed(&mut self, piece: &[u8]) -> Result<Completed, LineTooLong> {
        let mut done = Completed::default();
        if let BodyMode::Json {
            array,
            lines: Lines::Multiple,
        } = self.mode
        {
            self.unfinished.extend_from_slice(piece);
            self.read_values(array, false, &mut done);
        } else if let Some(last) = piece.iter().rposition(|b| *b == b'\n') {
            let mut lines = std::mem::take(&mut self.unfinished);
            lines.extend_from_slice(&piece[..last]);
            for line in lines.split(|b| *b == b'\n') {
                self.read_line(line, &mut done);
            }
            self.unfinished.extend_from_slice(&piece[last + 1..]);
        } else {
            self.unfinished.extend_from_slice(piece);
        }
        if self.unfinished.len() > MAX_UNFINISHED_BYTES {
            return Err(LineTooLong);
        }
        Ok(done)
    }

    /// The body ended: reads its last line (one without a newline), or its last values.
    pub fn finish(&mut self) -> Completed {
        let mut done = Completed::default();
        match self.mode {
            BodyMode::Json {
                array,
                lines: Lines::Multiple,
            } => self.read_values(array, true, &mut done),
            _ => {
                let rest = std::mem::take(&mut self.unfinished);
                self.read_line(&rest, &mut done);
            }
        }
        done
    }

    fn read_line(&mut self, line: &[u8], done: &mut Completed) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        match self.mode {
            BodyMode::Discard => {
                self.events += 1;
                done.records += 1;
            }
            BodyMode::Csv => self.reject(
                "request parsed as CSV (Feldera's default `format`); the double accepts only \
                 `format=json`: send `?format=json`"
                    .to_string(),
                line,
            ),
            BodyMode::Json { array, .. } => {
                let mut values = serde_json::Deserializer::from_slice(line).into_iter::<Json>();
                let mut start = 0;
                loop {
                    match values.next() {
                        None => return,
                        Some(Ok(value)) => {
                            let end = values.byte_offset();
                            self.read_value(&value, &line[start..end], array, done);
                            start = end;
                        }
                        Some(Err(e)) => {
                            return self.reject(invalid_json(&e), &line[start..]);
                        }
                    }
                }
            }
        }
    }

    /// `lines=multiple`: reads every complete top-level value of the unfinished text and
    /// keeps the rest for the next piece (at the end of the body there is none).
    fn read_values(&mut self, array: bool, at_end: bool, done: &mut Completed) {
        let text = std::mem::take(&mut self.unfinished);
        let mut start = 0;
        'restart: while start < text.len() {
            let rest = &text[start..];
            let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<Json>();
            let mut read = 0;
            loop {
                match values.next() {
                    None => {
                        start = text.len();
                        break 'restart;
                    }
                    Some(Ok(value)) => {
                        let end = values.byte_offset();
                        self.read_value(&value, &rest[read..end], array, done);
                        read = end;
                    }
                    Some(Err(e)) if e.is_eof() && !at_end => {
                        start += read;
                        break 'restart;
                    }
                    Some(Err(e)) => {
                        let blank = rest[read..]
                            .iter()
                            .take_while(|b| b.is_ascii_whitespace())
                            .count();
                        let bad = &rest[read + blank..];
                        match bad.iter().position(|b| *b == b'\n') {
                            Some(newline) => {
                                self.reject(invalid_json(&e), &bad[..newline]);
                                start += read + blank + newline + 1;
                                continue 'restart;
                            }
                            None if at_end => {
                                self.reject(invalid_json(&e), bad);
                                start = text.len();
                                break 'restart;
                            }
                            // Resume at the next line, once it has arrived.
                            None => {
                                start += read;
                                break 'restart;
                            }
                        }
                    }
                }
            }
        }
        self.unfinished = text[start..].to_vec();
    }

    /// One top-level value: an event, or with `array=true` an array of events (queued
    /// together, as Feldera's parser hands over whole values).
    fn read_value(&mut self, value: &Json, text: &[u8], array: bool, done: &mut Completed) {
        match (array, value) {
            (false, event) => self.read_event(event, Some(text.trim_ascii()), done),
            (true, Json::Array(events)) => {
                for event in events {
                    self.read_event(event, None, done);
                }
            }
            (true, _) => self.reject(
                "with `array=true` every value must be a JSON array of events".to_string(),
                text.trim_ascii(),
            ),
        }
    }

    fn reject(&mut self, description: String, text: &[u8]) {
        self.events += 1;
        self.errors.push(ParseError {
            description,
            event_number: self.events,
            field: None,
            invalid_text: Some(excerpt(text)),
        });
    }

    fn read_event(&mut self, event: &Json, line: Option<&[u8]>, done: &mut Completed) {
        self.events += 1;
        match parse_event(self.rel, event) {
            Ok(changes) => {
                done.records += changes.len() as u64;
                done.changes.extend(changes);
            }
            Err(e) => self.errors.push(ParseError {
                description: e.description,
                event_number: self.events,
                field: e.field,
                invalid_text: Some(match line {
                    Some(l) => excerpt(l),
                    None => event.to_string(),
                }),
            }),
        }
    }
}

/// serde_json's message without its position, which counts from wherever parsing began and
/// so would differ with how the body arrived.
fn invalid_json(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let what = text.split(" at line ").next().unwrap_or(&text);
    format!("invalid JSON: {what}")
}

fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.chars().take(200).collect()
}

/// `details` of a 400 `ParseErrors` response.
pub fn errors_details(errors: &[ParseError]) -> Json {
    let listed: Vec<Json> = errors
        .iter()
        .take(MAX_LISTED_ERRORS)
        .map(|e| {
            json!({
                "description": e.description,
                "event_number": e.event_number,
                "field": e.field,
                "invalid_bytes": null,
                "invalid_text": e.invalid_text,
                "suggestion": null,
            })
        })
        .collect();
    json!({"num_errors": errors.len(), "errors": listed})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feldera_double::schema::Schema;

    fn rel(keyed: bool) -> Relation {
        let mut t = json!({"name": "t", "case_sensitive": false, "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "Name", "case_sensitive": true, "columntype": {"type": "VARCHAR", "nullable": true}}
        ], "materialized": false});
        if keyed {
            t["primary_key"] = json!(["id"]);
        }
        Schema::parse(json!({"inputs": [t], "outputs": []}))
            .unwrap()
            .inputs
            .remove(0)
    }

    /// What a whole body gave, read in pieces of `piece_len` bytes.
    #[derive(Debug, PartialEq)]
    struct Parsed {
        changes: Vec<Change>,
        records: u64,
        events: u64,
        errors: Vec<ParseError>,
    }

    fn read_in_pieces(rel: &Relation, body: &[u8], mode: BodyMode, piece_len: usize) -> Parsed {
        let mut reader = BodyReader::new(rel, mode);
        let (mut changes, mut records) = (Vec::new(), 0);
        for piece in body.chunks(piece_len.max(1)) {
            let done = reader.feed(piece).expect("short lines");
            changes.extend(done.changes);
            records += done.records;
        }
        let done = reader.finish();
        changes.extend(done.changes);
        records += done.records;
        Parsed {
            changes,
            records,
            events: reader.events,
            errors: reader.errors,
        }
    }

    /// `lines=single`, as slotline sends.
    fn parse_body(rel: &Relation, body: &[u8], array: bool) -> Parsed {
        let mode = BodyMode::Json {
            array,
            lines: Lines::Single,
        };
        read_in_pieces(rel, body, mode, body.len())
    }

    fn multiple(array: bool) -> BodyMode {
        BodyMode::Json {
            array,
            lines: Lines::Multiple,
        }
    }

    #[test]
    fn a_discarded_body_counts_its_non_blank_lines_and_carries_no_change() {
        let body = b"{\"insert\": {\"id\": 1}}\n\n  \nnot even json\n{\"delete\": {\"id\": 2}}";
        let p = read_in_pieces(&rel(true), body, BodyMode::Discard, body.len());
        assert_eq!((p.events, p.records), (3, 3));
        assert!(p.changes.is_empty());
        assert!(p.errors.is_empty());
    }

    #[test]
    fn a_body_read_one_byte_at_a_time_gives_what_it_gives_read_whole() {
        let body = b"{\"insert\": {\"id\": 1, \"Name\": \"\xc3\xa9\"}}\n\nnot json\n{\"delete\": {\"id\": 2}}";
        for mode in [
            BodyMode::Json {
                array: false,
                lines: Lines::Single,
            },
            multiple(false),
            BodyMode::Csv,
            BodyMode::Discard,
        ] {
            assert_eq!(
                read_in_pieces(&rel(true), body, mode, 1),
                read_in_pieces(&rel(true), body, mode, body.len()),
                "{mode:?}"
            );
        }
        let array = b"[{\"insert\": {\"id\": 1}},\n {\"delete\": {\"id\": 1}}]\n[]";
        let mode = multiple(true);
        assert_eq!(
            read_in_pieces(&rel(true), array, mode, 1),
            read_in_pieces(&rel(true), array, mode, array.len())
        );
    }

    #[test]
    fn a_line_is_handed_over_once_its_newline_arrives_and_not_before() {
        let rel = rel(true);
        let single = BodyMode::Json {
            array: false,
            lines: Lines::Single,
        };
        let mut reader = BodyReader::new(&rel, single);
        let first = reader
            .feed(b"{\"insert\": {\"id\": 1}}\n{\"insert\": {\"id\"")
            .unwrap();
        assert_eq!(first.records, 1, "the complete line, not the split one");
        let second = reader.feed(b": 2}}").unwrap();
        assert_eq!(second, Completed::default(), "still no newline");
        assert_eq!(reader.feed(b"\n").unwrap().records, 1);
        assert_eq!(reader.finish(), Completed::default());
        assert_eq!((reader.events, reader.errors.len()), (2, 0));
    }

    #[test]
    fn csv_lines_are_all_rejected_and_carry_no_record() {
        let p = read_in_pieces(&rel(true), b"1,a\n\n2,b", BodyMode::Csv, 3);
        assert_eq!((p.events, p.records, p.errors.len()), (2, 0, 2));
        assert_eq!(p.errors[1].event_number, 2);
    }

    #[test]
    fn bad_events_are_numbered_and_good_ones_kept() {
        let body = b"{\"insert\": {\"ID\": 1, \"Name\": \"a\"}}\n\n{\"insert\": {\"id\": \"x\"}}\nnot json\n{\"delete\": {\"id\": 2}}\n";
        let p = parse_body(&rel(true), body, false);
        assert_eq!(p.events, 4);
        assert_eq!(p.changes.len(), 2);
        let numbers: Vec<u64> = p.errors.iter().map(|e| e.event_number).collect();
        assert_eq!(numbers, vec![2, 3]);
        assert_eq!(p.errors[0].field.as_deref(), Some("id"));
    }

    #[test]
    fn quoted_field_needs_exact_case_and_update_needs_a_key() {
        let p = parse_body(
            &rel(false),
            b"{\"insert\": {\"id\": 1, \"name\": \"x\"}}\n{\"insert\": {\"id\": 2, \"other\": 1}}\n{\"update\": {\"id\": 1}}",
            false,
        );
        assert_eq!(p.changes.len(), 1, "unknown keys are ignored");
        match &p.changes[0] {
            Change::Insert(row) => assert_eq!(row[1], crate::feldera_double::value::Value::Null),
            other => panic!("expected an insert, got {other:?}"),
        }
        assert_eq!(p.errors.len(), 2);
        assert!(
            p.errors[0]
                .description
                .contains("incorrect case-sensitive field name: expected: Name, found: name"),
            "{:?}",
            p.errors[0]
        );
        assert!(p.errors[1].description.contains("no primary key"));
    }

    #[test]
    fn event_objects_refuse_unknown_keys_and_skip_null_operations() {
        let p = parse_body(
            &rel(true),
            b"{\"insert\": {\"id\": 1}, \"weight\": 1}\n{}\n{\"insert\": null, \"table\": \"t\"}",
            false,
        );
        assert_eq!((p.events, p.changes.len()), (3, 0));
        assert_eq!(p.errors.len(), 1);
        assert!(
            p.errors[0].description.contains("unknown field `weight`"),
            "{:?}",
            p.errors
        );
    }

    #[test]
    fn missing_columns_take_their_default_and_json_null_stays_a_variant_null_when_not_null() {
        let rel = Schema::parse(json!({"inputs": [{"name": "t", "primary_key": ["id"], "fields": [
            {"name": "id", "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "n", "default": "0", "columntype": {"type": "INTEGER", "nullable": false}},
            {"name": "s", "default": "'it''s'", "columntype": {"type": "VARCHAR", "nullable": true}},
            {"name": "v", "columntype": {"type": "VARIANT", "nullable": false}},
            {"name": "w", "columntype": {"type": "VARIANT", "nullable": true}}
        ]}], "outputs": []}))
        .unwrap()
        .inputs
        .remove(0);
        let p = parse_body(
            &rel,
            b"{\"insert\": {\"id\": 1, \"v\": null, \"w\": null}}",
            false,
        );
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        use crate::feldera_double::value::Value;
        assert_eq!(
            p.changes,
            vec![Change::Insert(vec![
                Value::Int(1),
                Value::Int(0),
                Value::Str("it's".into()),
                Value::Variant("null".into()),
                Value::Null,
            ])]
        );
    }

    #[test]
    fn columns_differing_only_in_case_shadow_each_other_as_in_feldera() {
        let rel = Schema::parse(json!({"inputs": [{"name": "t", "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": true}},
            {"name": "ID", "case_sensitive": true, "columntype": {"type": "BIGINT", "nullable": true}}
        ]}], "outputs": []}))
        .unwrap()
        .inputs
        .remove(0);
        let p = parse_body(
            &rel,
            b"{\"insert\": {\"id\": 1}}\n{\"insert\": {\"ID\": 2}}",
            false,
        );
        assert_eq!(p.errors.len(), 1, "`id` is found as the quoted `ID`");
        use crate::feldera_double::value::Value;
        assert_eq!(
            p.changes,
            vec![Change::Insert(vec![Value::Null, Value::Int(2)])],
            "column `id` can never be set"
        );
    }

    #[test]
    fn single_lines_take_several_values_on_a_line_but_none_across_lines() {
        let body = b"{\"insert\": {\"id\": 1}} {\"insert\": {\"id\": 2}}\n{\"insert\":\n {\"id\": 3}}\n\n{\"delete\": {\"id\": 1}}\n";
        let p = parse_body(&rel(true), body, false);
        assert_eq!(p.changes.len(), 3, "ids 1 and 2, then the delete: {p:?}");
        assert!(
            p.errors[0].description.contains("EOF while parsing"),
            "{p:?}"
        );
        // The second half reads as an event with an unknown key, then a stray `}`.
        let numbers: Vec<u64> = p.errors.iter().map(|e| e.event_number).collect();
        assert_eq!(numbers, vec![3, 4, 5], "{p:?}");
    }

    #[test]
    fn multiple_lines_take_values_spanning_lines_and_resume_after_bad_text_at_the_next_line() {
        let body = b"{\"insert\": {\"id\": 1}} {\"insert\": {\"id\": 2}}\n{\"insert\":\n {\"id\": 3}}\nnot json\n{\"delete\": {\"id\": 1}}";
        for piece_len in [1, 7, body.len()] {
            let p = read_in_pieces(&rel(true), body, multiple(false), piece_len);
            assert_eq!(p.changes.len(), 4, "{piece_len}: {p:?}");
            assert_eq!(p.events, 5, "{piece_len}: {p:?}");
            assert_eq!(p.errors.len(), 1, "{piece_len}: {p:?}");
            assert_eq!(p.errors[0].event_number, 4);
            assert_eq!(p.errors[0].invalid_text.as_deref(), Some("not json"));
        }
    }

    #[test]
    fn a_value_is_handed_over_once_complete_with_multiple_lines() {
        let rel = rel(true);
        let mut reader = BodyReader::new(&rel, multiple(false));
        assert_eq!(
            reader.feed(b"{\"insert\":\n").unwrap(),
            Completed::default()
        );
        assert_eq!(reader.feed(b" {\"id\": 1}}").unwrap().records, 1);
        assert_eq!(reader.finish(), Completed::default());
        assert_eq!((reader.events, reader.errors.len()), (1, 0));
    }

    #[test]
    fn an_unfinished_value_at_the_end_of_the_body_is_an_error() {
        let p = read_in_pieces(&rel(true), b"{\"insert\": {\"id\": 1}", multiple(false), 4);
        assert_eq!((p.events, p.changes.len(), p.errors.len()), (1, 0, 1));
    }

    #[test]
    fn array_mode_reads_one_json_array() {
        let p = parse_body(
            &rel(true),
            b"[{\"insert\": {\"id\": 1}}, {\"delete\": {\"id\": 1}}]",
            true,
        );
        assert_eq!((p.events, p.changes.len(), p.errors.len()), (2, 2, 0));
    }
}
