//! Feldera HTTP API: request builders and response classification.
//!
//! The core builds every Feldera URL and body and reads every answer; shells only execute
//! [`HttpRequest`]s and hand back a [`Reply`].

pub mod checkpoint;
#[cfg(feature = "fuzzing")]
pub mod fuzz;
pub mod ingress_stats;
pub mod lifecycle;
pub mod pipelines;
pub mod query;
pub mod request;
pub mod response;
pub mod token;

pub use checkpoint::{
    classify_checkpoint, classify_checkpoint_status, classify_stats, pipeline_state,
    CheckpointFailed, CheckpointOutcome, CheckpointStatusOutcome, FaultTolerance, Incarnation,
    StatsOutcome,
};
pub use pipelines::{
    classify_pipeline_list, describe_pipelines, is_not_found, PIPELINE_FIX, SCHEMA_FIX,
};
pub use query::{
    classify_commit_transaction, classify_query, classify_start_transaction,
    classify_transaction_token, CommitOutcome, QueryOutcome, RowStream, StartTransactionOutcome,
    StreamError, TransactionTokenOutcome,
};
pub use request::{
    redact_userinfo, EndpointError, FelderaEndpoint, HttpRequest, Method, FORWARDED_TIMEOUT_MS,
    QUESTION_TIMEOUT_MS,
};
pub use response::{
    body_prefix, classify_completion, classify_ingress, classify_pipeline, error_from,
    is_transient_status, CompletionOutcome, FelderaError, IngressOutcome, ParseErrorSummary,
    PipelineOutcome, Reply, BODY_PREFIX_BYTES,
};
