//! The query parameters of an ingress request read as Feldera reads them: `format` picks
//! the parser (CSV when absent); the JSON parser's configuration (`update_format`,
//! `json_flavor`, `array`, `lines`) is read from the whole query, absent keys taking their
//! defaults and keys it does not know ignored; a value it does not know is 400
//! `ConfigError.ParserConfigParseError`. The endpoint is named after the table and that
//! configuration, so every spelling of one configuration shares one endpoint and each
//! other configuration makes another (docs/feldera.md, "Ingress").
//!
//! Owns: the parameters → (how to read the body, which endpoint). Never touches state.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;

use super::error::{api_error, invalid_param};
use super::ingress::{BodyMode, Lines};

/// How to read one request, and the endpoint it goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressFormat {
    /// `Json` or `Csv`; the caller swaps in `Discard` for a discarding double.
    pub mode: BodyMode,
    /// Feldera's endpoint identity: the table as the path names it and the parser
    /// configuration with its defaults filled in.
    pub endpoint: String,
}

/// Reads the parameters of `POST .../ingress/{table}` (`table` decoded, as Feldera's
/// router hands it over; `raw_query` quoted in errors).
pub fn read(
    table: &str,
    params: &BTreeMap<String, String>,
    raw_query: &str,
) -> Result<IngressFormat, Box<Response>> {
    let format = params.get("format").map_or("csv", String::as_str);
    match format {
        "json" => read_json(table, params, raw_query),
        "csv" => {
            // The double does not parse CSV: Feldera's CSV options are not read, so every
            // CSV request of a table shares one endpoint here.
            Ok(IngressFormat {
                mode: BodyMode::Csv,
                endpoint: format!("{table}.api-ingress csv"),
            })
        }
        other => Err(Box::new(api_error(
            StatusCode::BAD_REQUEST,
            "UnknownInputFormat",
            format!("unknown input format `{other}` (the double accepts `json`)"),
            json!({"format": other}),
        ))),
    }
}

fn read_json(
    table: &str,
    params: &BTreeMap<String, String>,
    raw_query: &str,
) -> Result<IngressFormat, Box<Response>> {
    let refuse = |error: String| {
        let endpoint_name = format!("{table}.api-ingress-json");
        Box::new(api_error(
            StatusCode::BAD_REQUEST,
            "ConfigError.ParserConfigParseError",
            format!(
                "Error parsing format configuration for input endpoint '{endpoint_name}': \
                 {error}\nInvalid configuration: {raw_query}"
            ),
            json!({"endpoint_name": endpoint_name, "error": error, "config": raw_query}),
        ))
    };
    let lines = match params.get("lines").map(String::as_str) {
        None | Some("multiple") => Lines::Multiple,
        Some("single") => Lines::Single,
        Some(other) => {
            return Err(refuse(format!(
                "unknown variant `{other}`, expected `multiple` or `single`"
            )))
        }
    };
    let array = match params.get("array").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(refuse(format!(
                "invalid value: string \"{other}\", expected a boolean"
            )))
        }
    };
    // Valid in Feldera but not implemented here: refused as the double's own limit.
    match params.get("update_format").map(String::as_str) {
        None | Some("insert_delete") => {}
        Some(other) => {
            return Err(Box::new(invalid_param(format!(
                "update_format `{other}`: the double implements only `insert_delete`"
            ))))
        }
    }
    match params.get("json_flavor").map(String::as_str) {
        None | Some("default") => {}
        Some(other) => {
            return Err(Box::new(invalid_param(format!(
                "json_flavor `{other}`: the double implements only `default`"
            ))))
        }
    }
    let lines_name = match lines {
        Lines::Multiple => "multiple",
        Lines::Single => "single",
    };
    Ok(IngressFormat {
        mode: BodyMode::Json { array, lines },
        endpoint: format!(
            "{table}.api-ingress json update_format=insert_delete json_flavor=default \
             array={array} lines={lines_name}"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(query: &str) -> BTreeMap<String, String> {
        query
            .split('&')
            .filter(|p| !p.is_empty())
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    fn endpoint(table: &str, query: &str) -> String {
        read(table, &params(query), query)
            .expect("a valid configuration")
            .endpoint
    }

    #[test]
    fn spellings_of_one_configuration_share_an_endpoint() {
        let slotline = endpoint("t", "format=json&update_format=insert_delete&lines=single");
        assert_eq!(endpoint("t", "lines=single&format=json"), slotline);
        assert_eq!(
            endpoint(
                "t",
                "format=json&lines=single&json_flavor=default&force=true&x=1"
            ),
            slotline,
            "defaults spelled out, `force` and unknown keys change nothing"
        );
    }

    #[test]
    fn another_configuration_or_table_is_another_endpoint() {
        let single = endpoint("t", "format=json&lines=single");
        assert_ne!(endpoint("t", "format=json"), single);
        assert_eq!(
            endpoint("t", "format=json"),
            endpoint("t", "format=json&lines=multiple")
        );
        assert_ne!(endpoint("t", "format=json&lines=single&array=true"), single);
        assert_ne!(endpoint("u", "format=json&lines=single"), single);
    }

    #[test]
    fn lines_is_read_as_feldera_reads_it() {
        let mode = |query: &str| read("t", &params(query), query).map(|f| f.mode);
        assert_eq!(
            mode("format=json&lines=single").unwrap(),
            BodyMode::Json {
                array: false,
                lines: Lines::Single
            }
        );
        assert_eq!(
            mode("format=json").unwrap(),
            BodyMode::Json {
                array: false,
                lines: Lines::Multiple
            },
            "Feldera's default"
        );
        assert!(
            mode("format=json&lines=Single").is_err(),
            "variants are case-sensitive"
        );
        assert!(mode("format=json&lines=one").is_err());
        assert!(mode("format=json&array=yes").is_err());
    }
}
