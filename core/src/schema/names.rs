//! Feldera's identifier rules, in one place: when two spellings name the same object, how a
//! table is spelled in a URL, how a column is spelled in JSON, and how a row read back from
//! an ad-hoc query maps onto the schema's columns.
//!
//! Feldera folds unquoted SQL identifiers to lowercase and keeps quoted ones exactly
//! (`case_sensitive: true`). Two names are the same object when their canonical forms are
//! equal. Everything slotline sends is spelled from the schema, never from PostgreSQL.
//! This module never parses user configuration (that is `routes`).

use super::types::{Field, Name};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;

/// Bytes left as they are in a URL path segment or query value: RFC 3986 "unreserved".
/// Everything else (including `"`, `+`, `/`, `=`, `%`, space) is percent-encoded.
const UNRESERVED_ONLY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes `text` for a URL path segment or a query parameter value.
pub fn percent_encode_component(text: &str) -> String {
    utf8_percent_encode(text, UNRESERVED_ONLY).to_string()
}

/// The Feldera name for a PostgreSQL identifier (a table, a column, a composite's member),
/// spelled so that Feldera keeps it exactly: unquoted when it reads back unchanged (lower
/// case letters, digits and `_`, not starting with a digit, not a reserved word), quoted
/// (`case_sensitive`) otherwise: mixed case, reserved words, any other character.
pub fn feldera_ident(pg_name: &str) -> Name {
    let plain = pg_name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && pg_name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !super::reserved::is_reserved(pg_name);
    match plain {
        true => Name::unquoted(pg_name),
        false => Name::quoted(pg_name),
    }
}

impl Name {
    /// Feldera's canonical form: unquoted names lowercased, quoted names as they are.
    pub fn canonical(&self) -> Cow<'_, str> {
        if self.case_sensitive {
            Cow::Borrowed(&self.name)
        } else {
            Cow::Owned(self.name.to_lowercase())
        }
    }

    /// Whether both names denote the same Feldera object (`users`, `USERS` and `"users"`
    /// do; `"Users"` is another one).
    pub fn same_as(&self, other: &Name) -> bool {
        self.canonical() == other.canonical()
    }

    /// The table name as an ingress/URL path segment: case-sensitive names are wrapped in
    /// double quotes (Feldera strips them), then everything is percent-encoded, so
    /// `"TaBle"` becomes `%22TaBle%22`.
    pub fn url_segment(&self) -> String {
        if self.case_sensitive {
            percent_encode_component(&format!("\"{}\"", self.name))
        } else {
            percent_encode_component(&self.name)
        }
    }

    /// The column name as a JSON string literal (quotes included, escaped), ready to be
    /// written before a `:` by the row encoder.
    pub fn json_key(&self) -> String {
        Value::String(self.name.clone()).to_string()
    }
}

/// Index of the field that the JSON key `key` denotes: an exact spelling wins, otherwise an
/// unquoted field matching case-insensitively (quoted fields match only exactly).
pub fn find_field(fields: &[Field], key: &str) -> Option<usize> {
    fields.iter().position(|f| f.name.name == key).or_else(|| {
        fields
            .iter()
            .position(|f| !f.name.case_sensitive && f.name.matches(key))
    })
}

/// Two columns of one table whose names differ only in case (`id` and `"ID"`). Feldera's
/// JSON input finds a row's columns through a map keyed by each column name's lowercase form,
/// so the later column shadows the earlier one: rows for such a table are mis-assigned or
/// refused. slotline refuses to route to it.
pub fn json_key_collision(fields: &[Field]) -> Option<(&Name, &Name)> {
    fields.iter().enumerate().find_map(|(i, a)| {
        let folded = a.name.name.to_lowercase();
        fields
            .get(i + 1..)?
            .iter()
            .find(|b| b.name.name.to_lowercase() == folded)
            .map(|b| (&a.name, &b.name))
    })
}

/// A query row's values in the schema's field order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NormalisedRow {
    /// One entry per field of the table, in schema order; `None` when the row had no key for
    /// it (an explicit JSON null is `Some(Value::Null)`).
    pub values: Vec<Option<Value>>,
    /// Keys that name no column of the table, as the answer spelled them.
    pub unknown_keys: Vec<String>,
}

/// A row that names one column twice under different spellings (`id` and `ID`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DuplicateColumn {
    pub column: Name,
    pub first: String,
    pub second: String,
}

impl fmt::Display for DuplicateColumn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the row names column {} twice, as `{}` and as `{}`; accepted: each column once",
            self.column, self.first, self.second
        )
    }
}

impl std::error::Error for DuplicateColumn {}

/// Maps an ad-hoc query row's object keys onto the table's fields, so that `{"ID": 9050}`
/// and `{"id": 9050}` read back as the same value of column `id`.
pub fn normalise_row(
    fields: &[Field],
    row: Map<String, Value>,
) -> Result<NormalisedRow, DuplicateColumn> {
    let mut values: Vec<Option<Value>> = vec![None; fields.len()];
    let mut spelled: Vec<Option<String>> = vec![None; fields.len()];
    let mut unknown_keys = Vec::new();
    for (key, value) in row {
        let Some(index) = find_field(fields, &key) else {
            unknown_keys.push(key);
            continue;
        };
        // `index` comes from `find_field` over the same slice, so all three have it.
        if let (Some(field), Some(slot), Some(seen)) = (
            fields.get(index),
            values.get_mut(index),
            spelled.get_mut(index),
        ) {
            if let Some(first) = seen.take() {
                return Err(DuplicateColumn {
                    column: field.name.clone(),
                    first,
                    second: key,
                });
            }
            *slot = Some(value);
            *seen = Some(key);
        }
    }
    Ok(NormalisedRow {
        values,
        unknown_keys,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{ColumnType, SqlType};
    use serde_json::json;

    fn field(name: Name) -> Field {
        Field::new(name, ColumnType::new(SqlType::BigInt, false))
    }

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn query_row_keys_in_any_case_normalise_to_the_same_unquoted_field() {
        let fields = [field(Name::unquoted("id"))];
        let lower = normalise_row(&fields, object(json!({"id": 9050}))).unwrap();
        let upper = normalise_row(&fields, object(json!({"ID": 9050}))).unwrap();
        assert_eq!(lower, upper);
        assert_eq!(lower.values, vec![Some(json!(9050))]);
        assert!(lower.unknown_keys.is_empty());
    }

    #[test]
    fn quoted_fields_match_row_keys_only_exactly() {
        let fields = [field(Name::quoted("Id"))];
        let row = normalise_row(&fields, object(json!({"id": 1, "Id": 2}))).unwrap();
        assert_eq!(row.values, vec![Some(json!(2))]);
        assert_eq!(row.unknown_keys, vec!["id".to_owned()]);
    }

    #[test]
    fn exact_spelling_wins_over_case_insensitive_match() {
        let fields = [field(Name::unquoted("id")), field(Name::quoted("ID"))];
        let row = normalise_row(&fields, object(json!({"ID": 1, "id": 2}))).unwrap();
        assert_eq!(row.values, vec![Some(json!(2)), Some(json!(1))]);
    }

    #[test]
    fn a_row_naming_one_column_twice_is_refused() {
        let fields = [field(Name::unquoted("id"))];
        let err = normalise_row(&fields, object(json!({"ID": 1, "id": 2}))).unwrap_err();
        insta::assert_snapshot!(err, @"the row names column id twice, as `ID` and as `id`; accepted: each column once");
    }

    #[test]
    fn missing_and_null_columns_stay_distinct() {
        let fields = [field(Name::unquoted("a")), field(Name::unquoted("b"))];
        let row = normalise_row(&fields, object(json!({"b": null}))).unwrap();
        assert_eq!(row.values, vec![None, Some(Value::Null)]);
    }

    #[test]
    fn columns_differing_only_in_case_collide_in_feldera_json_input() {
        let fields = [
            field(Name::unquoted("id")),
            field(Name::unquoted("name")),
            field(Name::quoted("ID")),
        ];
        let (a, b) = json_key_collision(&fields).unwrap();
        assert_eq!(
            (a.to_string(), b.to_string()),
            ("id".into(), "\"ID\"".into())
        );
        let distinct = [field(Name::unquoted("id")), field(Name::quoted("Id2"))];
        assert_eq!(json_key_collision(&distinct), None);
    }

    #[test]
    fn canonical_forms_decide_identity() {
        assert!(Name::unquoted("USERS").same_as(&Name::quoted("users")));
        assert!(Name::unquoted("users").same_as(&Name::unquoted("Users")));
        assert!(!Name::unquoted("users").same_as(&Name::quoted("Users")));
        assert!(!Name::quoted("users").same_as(&Name::quoted("Users")));
    }

    #[test]
    fn url_segments_quote_case_sensitive_names_and_encode_everything_reserved() {
        assert_eq!(Name::quoted("TaBle").url_segment(), "%22TaBle%22");
        assert_eq!(Name::unquoted("line_items").url_segment(), "line_items");
        assert_eq!(Name::quoted("a b/c").url_segment(), "%22a%20b%2Fc%22");
        assert_eq!(Name::unquoted("café").url_segment(), "caf%C3%A9");
    }

    #[test]
    fn json_keys_are_escaped_string_literals() {
        assert_eq!(Name::unquoted("id").json_key(), "\"id\"");
        assert_eq!(Name::quoted("a\"b").json_key(), "\"a\\\"b\"");
    }

    #[test]
    fn component_encoding_escapes_token_and_sql_characters() {
        assert_eq!(percent_encode_component("ab+/="), "ab%2B%2F%3D");
        assert_eq!(
            percent_encode_component("SELECT \"Id\" FROM t WHERE x = 'a'"),
            "SELECT%20%22Id%22%20FROM%20t%20WHERE%20x%20%3D%20%27a%27"
        );
    }

    proptest::proptest! {
        #[test]
        fn url_segments_decode_back_to_the_name_feldera_expects(name in "\\PC{1,16}") {
            let quoted = Name::quoted(&name).url_segment();
            let decoded = percent_encoding::percent_decode_str(&quoted).decode_utf8().unwrap();
            proptest::prop_assert_eq!(decoded, format!("\"{name}\""));
            let unreserved = |b: u8| b.is_ascii_alphanumeric() || b"-._~%".contains(&b);
            proptest::prop_assert!(quoted.bytes().all(unreserved));
        }
    }
}
