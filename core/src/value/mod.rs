//! Value decoding: a PostgreSQL value's text output to Feldera JSON, driven by the pair
//! (PostgreSQL type OID, Feldera column type). Shared by pgoutput and COPY.
//!
//! PLACEHOLDER: the value helper replaces this file. The signature of `plan` and the
//! `Unsupported` error are the interface `contract::mapping` builds on.

use crate::contract::{ColumnType, SqlType};
use std::fmt;

/// How one column's values are turned into JSON; chosen once per (type OID, target) pair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValuePlan {
    pub pg_type: u32,
    pub target: ColumnType,
}

/// The pair cannot be mapped: names both types and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    pub pg_type: String,
    pub target: String,
    pub why: String,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PostgreSQL type {} cannot be sent to a Feldera {} column: {}",
            self.pg_type, self.target, self.why
        )
    }
}

/// Chooses the decoder for a PostgreSQL type OID and a Feldera column type, or says why the
/// pair is not supported.
pub fn plan(pg_type: u32, target: &ColumnType) -> Result<ValuePlan, Unsupported> {
    let ok = matches!(
        (pg_type, target.sql),
        (16, SqlType::Boolean)
            | (
                20 | 21 | 23,
                SqlType::TinyInt | SqlType::SmallInt | SqlType::Integer | SqlType::BigInt
            )
            | (25 | 1043, SqlType::Varchar | SqlType::Char)
    ) || target.sql == SqlType::Varchar;
    if ok {
        Ok(ValuePlan {
            pg_type,
            target: target.clone(),
        })
    } else {
        Err(Unsupported {
            pg_type: format!("oid {pg_type}"),
            target: target.to_string(),
            why: "placeholder".into(),
        })
    }
}
