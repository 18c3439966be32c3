//! The query strings slotline puts on its requests, read the way Feldera's server reads
//! them: an ingress URL's parameters become the JSON parser's configuration
//! (`JsonParserConfig`, deserialized from the URL with `serde_urlencoded`, as the JSON
//! input format's `config_from_http_request` does), and an ad-hoc query's become
//! `AdhocQueryArgs`. A misspelled parameter or value would not fail Feldera's parsing
//! (unknown parameters are ignored, missing ones take defaults): it would silently give
//! another configuration, so each field is compared with what slotline means.

use feldera_types::format::json::{JsonFlavor, JsonLines, JsonParserConfig, JsonUpdateFormat};
use feldera_types::query::{AdHocResultFormat, AdhocQueryArgs};
use serde::Deserialize;
use slotline_core::schema::Name;
use slotline_core::feldera::FelderaEndpoint;

type Outcome = (String, Result<(), String>);

/// The query string of `url` (after `?`).
fn query_string(url: &str) -> Result<&str, String> {
    url.split_once('?')
        .map(|(_, query)| query)
        .ok_or_else(|| format!("{url}: no query string"))
}

/// Reads `query` into `T` as Feldera's server does.
fn read<'de, T: Deserialize<'de>>(query: &'de str) -> Result<T, String> {
    T::deserialize(serde_urlencoded::Deserializer::new(form_urlencoded::parse(
        query.as_bytes(),
    )))
    .map_err(|e| format!("{query}: Feldera refuses it: {e}"))
}

fn ingress(table: &Name) -> Result<(), String> {
    let endpoint = FelderaEndpoint::new("http://feldera:8080", "p", None)
        .map_err(|e| format!("endpoint: {e:?}"))?;
    let url = endpoint.ingress_url(table);
    let query = query_string(&url)?;
    let format = form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "format")
        .map(|(_, value)| value.into_owned());
    if format.as_deref() != Some("json") {
        return Err(format!("{url}: format is {format:?}, not json"));
    }
    let config: JsonParserConfig = read(query)?;
    let mut wrong = Vec::new();
    if config.update_format != JsonUpdateFormat::InsertDelete {
        wrong.push(format!("update_format {:?}", config.update_format));
    }
    if config.lines != JsonLines::Single {
        wrong.push(format!("lines {:?}", config.lines));
    }
    if config.array {
        wrong.push("array true".to_owned());
    }
    if !matches!(config.json_flavor, JsonFlavor::Default) {
        wrong.push(format!("json_flavor {:?}", config.json_flavor));
    }
    match wrong.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "{url}: Feldera reads {}; slotline writes insert/delete records, one per line, no array, default flavor",
            wrong.join(", ")
        )),
    }
}

fn adhoc_query() -> Result<(), String> {
    let endpoint = FelderaEndpoint::new("http://feldera:8080", "p", None)
        .map_err(|e| format!("endpoint: {e:?}"))?;
    let sql = r#"SELECT "users"."id" AS "k0" FROM "users" WHERE 'a&b' <> '#%'"#;
    for request in [
        endpoint.query(sql, 1_000),
        endpoint.query_streamed(sql, 1_000),
    ] {
        let query = query_string(&request.url)?;
        let args: AdhocQueryArgs = read(query)?;
        if args.sql != sql {
            return Err(format!(
                "{}: Feldera reads the SQL as {:?}, not {sql:?}",
                request.url, args.sql
            ));
        }
        if args.format != AdHocResultFormat::Json {
            return Err(format!(
                "{}: Feldera answers in {}, but slotline reads NDJSON (format json)",
                request.url, args.format
            ));
        }
    }
    Ok(())
}

pub fn run() -> Vec<Outcome> {
    vec![
        (
            "ingress parameters (table users)".to_owned(),
            ingress(&Name::unquoted("users")),
        ),
        (
            "ingress parameters (quoted table \"Order Lines\")".to_owned(),
            ingress(&Name::quoted("Order Lines")),
        ),
        ("ad-hoc query parameters".to_owned(), adhoc_query()),
    ]
}
