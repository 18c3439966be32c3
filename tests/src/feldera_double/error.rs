//! Feldera's error body, `{"message", "error_code", "details"}`, shared by every endpoint,
//! and the note a handler leaves for the request log.
//!
//! Owns: building error responses. Never decides which error applies.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::log::LogNote;

/// An error response in Feldera's shape; the error code also goes to the request log.
pub fn api_error(
    status: StatusCode,
    code: &str,
    message: impl Into<String>,
    details: Value,
) -> Response {
    let body = json!({
        "message": message.into(),
        "error_code": code,
        "details": details,
    });
    let mut resp = (status, Json(body)).into_response();
    note(&mut resp, |n| n.error_code = Some(code.to_string()));
    resp
}

/// 404 for any pipeline name other than the configured one.
pub fn unknown_pipeline(name: &str) -> Response {
    api_error(
        StatusCode::NOT_FOUND,
        "UnknownPipelineName",
        format!("Unknown pipeline name '{name}'"),
        json!({"pipeline_name": name}),
    )
}

/// 400 for a missing or malformed query parameter.
pub fn invalid_param(message: impl Into<String>) -> Response {
    api_error(StatusCode::BAD_REQUEST, "InvalidParam", message, json!({}))
}

/// Adds to (or creates) the log note of a response.
pub fn note(resp: &mut Response, edit: impl FnOnce(&mut LogNote)) {
    match resp.extensions_mut().get_mut::<LogNote>() {
        Some(n) => edit(n),
        None => {
            let mut n = LogNote::default();
            edit(&mut n);
            resp.extensions_mut().insert(n);
        }
    }
}
