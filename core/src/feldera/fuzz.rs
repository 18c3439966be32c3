//! Fuzz harness: arbitrary bytes into every Feldera answer parser. The only property is
//! totality: no input may panic (or allocate without bound).

use super::checkpoint::{classify_checkpoint, classify_checkpoint_status, classify_stats};
use super::query::{
    classify_commit_transaction, classify_query, classify_start_transaction,
    classify_transaction_token,
};
use super::response::{
    classify_completion, classify_ingress, classify_pipeline, error_from, Reply,
};
use crate::schema::names::normalise_row;
use crate::schema::program::parse_program_schema;
use crate::schema::{ColumnType, Field, Name, SqlType};

/// Statuses that exercise every branch of the classifiers.
const STATUSES: [u16; 13] = [
    200, 202, 204, 301, 400, 404, 408, 409, 410, 429, 500, 501, 503,
];

/// Feeds `data` as the body of every status to every classifier, and to the schema and row
/// parsers.
pub fn fuzz_feldera_responses(data: &[u8]) {
    for status in STATUSES {
        let reply = Reply::Answered { status, body: data };
        let _ = classify_ingress(reply);
        let _ = classify_completion(reply);
        let _ = classify_pipeline(reply);
        let _ = classify_start_transaction(reply);
        let _ = classify_commit_transaction(reply);
        let _ = classify_transaction_token(reply);
        let _ = classify_stats(reply);
        let _ = classify_checkpoint(reply);
        let _ = classify_checkpoint_status(reply);
        let _ = error_from(status, data).to_string();
        if let super::query::QueryOutcome::Rows(rows) = classify_query(reply) {
            let fields = [
                Field::new(
                    Name::unquoted("id"),
                    ColumnType::new(SqlType::BigInt, false),
                ),
                Field::new(Name::quoted("Id"), ColumnType::new(SqlType::BigInt, true)),
            ];
            for row in rows {
                let _ = normalise_row(&fields, row);
            }
        }
    }
    let _ = parse_program_schema(data);
    let text = String::from_utf8_lossy(data);
    let _ = classify_ingress(Reply::Failed { error: &text });
}
