//! `GET /v0/pipelines?selector=status`: the names of the pipelines Feldera has. Asked only
//! after `GET /v0/pipelines/{p}` answered 404, so that the refusal of an unknown
//! `FELDERA_PIPELINE` can name the pipelines there are. `selector=status` leaves out every
//! program's code and schema (docs/feldera.md, "Pipelines").
//!
//! Never decides anything by itself: whatever the list says (or if it cannot be read), the
//! pipeline was not found, and the caller's refusal stands as it was.

use super::response::{error_from, is_success, FelderaError, Reply};
use serde_json::Value;

/// How to fix a pipeline Feldera does not have, or cannot be asked for: what `check` and
/// `status` say with the finding and a refused start after its reason.
pub const PIPELINE_FIX: &str =
    "check FELDERA_URL, FELDERA_API_KEY and FELDERA_PIPELINE, and that Feldera is up";

/// How to fix a pipeline whose schema slotline cannot read.
pub const SCHEMA_FIX: &str = "use a Feldera version slotline supports (see docs/feldera.md)";

/// How many pipeline names a refusal lists; the rest are counted.
pub const PIPELINES_LISTED: usize = 20;

/// The pipeline request's answer means "no pipeline of that name" (HTTP 404, Feldera's
/// `UnknownPipelineName`, or a FELDERA_URL whose path leads nowhere: the list says which).
pub fn is_not_found(error: &FelderaError) -> bool {
    error.status == Some(404)
}

/// The names of Feldera's pipelines, sorted, or why they cannot be read.
pub fn classify_pipeline_list(reply: Reply<'_>) -> Result<Vec<String>, String> {
    let (status, body) = match reply {
        Reply::Failed { error } => return Err(FelderaError::transport(error).to_string()),
        Reply::Answered { status, body } => (status, body),
    };
    if !is_success(status) {
        return Err(error_from(status, body).to_string());
    }
    let unreadable = || {
        FelderaError::unexpected(status, "not a JSON array of pipelines with names", body)
            .to_string()
    };
    let Ok(Value::Array(pipelines)) = serde_json::from_slice::<Value>(body) else {
        return Err(unreadable());
    };
    let mut names = pipelines
        .iter()
        .map(|p| p.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect::<Option<Vec<String>>>()
        .ok_or_else(unreadable)?;
    names.sort();
    names.dedup();
    Ok(names)
}

/// What an operator needs after a 404 for `pipeline`: the pipelines there are (at most
/// `PIPELINES_LISTED` by name), that there are none, or why the list is unknown.
pub fn describe_pipelines(pipeline: &str, listed: &Result<Vec<String>, String>) -> String {
    match listed {
        Ok(names) if names.is_empty() => {
            format!("Feldera has no pipeline; create {pipeline} or set FELDERA_PIPELINE")
        }
        Ok(names) => {
            let shown: Vec<String> = names
                .iter()
                .take(PIPELINES_LISTED)
                .map(|n| format!("{n:?}"))
                .collect();
            let more = match names.len().saturating_sub(PIPELINES_LISTED) {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            format!(
                "Feldera has pipelines {}{more}; set FELDERA_PIPELINE to one of them",
                shown.join(", ")
            )
        }
        Err(why) => format!("the list of Feldera's pipelines could not be read: {why}"),
    }
}

#[cfg(test)]
#[path = "pipelines_tests.rs"]
mod tests;
