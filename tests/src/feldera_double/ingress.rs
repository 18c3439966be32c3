//! An ingress request body (`format=json`, `update_format=insert_delete`) → the changes of
//! its valid events plus one parse error per invalid event. Like Feldera, a bad event does
//! not spoil the request: the caller ingests the valid ones and still answers 400.
//!
//! Owns: splitting the body into events and numbering them. Never touches state.

use serde_json::{json, Value as Json};

use super::row::{parse_event, Change};
use super::schema::Relation;

/// At most this many errors are listed in a `ParseErrors` body (`num_errors` counts all).
const MAX_LISTED_ERRORS: usize = 1000;

/// One rejected event, as Feldera reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub description: String,
    /// 1-based position of the event in the request.
    pub event_number: u64,
    pub field: Option<String>,
    pub invalid_text: Option<String>,
}

/// The result of parsing one request body.
#[derive(Debug, Default)]
pub struct Parsed {
    pub changes: Vec<Change>,
    /// Events seen, valid or not.
    pub events: u64,
    pub errors: Vec<ParseError>,
}

/// Parses a body of newline-separated events, or one JSON array of events when `array`.
pub fn parse_body(rel: &Relation, body: &[u8], array: bool) -> Parsed {
    let mut parsed = Parsed::default();
    if array {
        match serde_json::from_slice::<Json>(body) {
            Ok(Json::Array(events)) => {
                for event in &events {
                    parse_one(rel, event, &mut parsed, None);
                }
            }
            Ok(_) | Err(_) => {
                parsed.events = 1;
                parsed.errors.push(ParseError {
                    description: "with `array=true` the body must be one JSON array of events"
                        .to_string(),
                    event_number: 1,
                    field: None,
                    invalid_text: Some(excerpt(body)),
                });
            }
        }
        return parsed;
    }
    for line in body.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Json>(line) {
            Ok(event) => parse_one(rel, &event, &mut parsed, Some(line)),
            Err(e) => {
                parsed.events += 1;
                parsed.errors.push(ParseError {
                    description: format!("invalid JSON: {e}"),
                    event_number: parsed.events,
                    field: None,
                    invalid_text: Some(excerpt(line)),
                });
            }
        }
    }
    parsed
}

/// Body for a CSV request (`format` absent or `csv`): the double does not parse CSV, so
/// every non-blank line is reported as a parse error and nothing is ingested. A JSON body
/// sent without `format=json` fails the same way against real Feldera (as CSV).
pub fn reject_as_csv(body: &[u8]) -> Parsed {
    let mut parsed = Parsed::default();
    for line in body.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        parsed.events += 1;
        parsed.errors.push(ParseError {
            description: "request parsed as CSV (Feldera's default `format`); the double \
                          accepts only `format=json`: send `?format=json`"
                .to_string(),
            event_number: parsed.events,
            field: None,
            invalid_text: Some(excerpt(line)),
        });
    }
    parsed
}

/// Body for a discarding double (`DoubleConfig::with_discard`): nothing is parsed or
/// applied; each non-blank line counts as one event, so the request log still tells how
/// many rows arrived.
pub fn count_discarded(body: &[u8]) -> Parsed {
    let events = body
        .split(|b| *b == b'\n')
        .filter(|line| !line.iter().all(u8::is_ascii_whitespace))
        .count() as u64;
    Parsed {
        events,
        ..Parsed::default()
    }
}

fn parse_one(rel: &Relation, event: &Json, parsed: &mut Parsed, line: Option<&[u8]>) {
    parsed.events += 1;
    match parse_event(rel, event) {
        Ok(changes) => parsed.changes.extend(changes),
        Err(e) => parsed.errors.push(ParseError {
            description: e.description,
            event_number: parsed.events,
            field: e.field,
            invalid_text: Some(match line {
                Some(l) => excerpt(l),
                None => event.to_string(),
            }),
        }),
    }
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

    #[test]
    fn a_discarded_body_counts_its_non_blank_lines_and_carries_no_change() {
        let body = b"{\"insert\": {\"id\": 1}}\n\n  \nnot even json\n{\"delete\": {\"id\": 2}}";
        let p = count_discarded(body);
        assert_eq!(p.events, 3);
        assert!(p.changes.is_empty());
        assert!(p.errors.is_empty());
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
    fn array_mode_reads_one_json_array() {
        let p = parse_body(
            &rel(true),
            b"[{\"insert\": {\"id\": 1}}, {\"delete\": {\"id\": 1}}]",
            true,
        );
        assert_eq!((p.events, p.changes.len(), p.errors.len()), (2, 2, 0));
    }
}
