//! The hot path: one value's text to JSON, by the decoder its plan chose.

use super::decode::{Decode, ValuePlan};
use super::error::{ValueError, ValueErrorKind};
use super::outcome::Outcome;
use super::{array, datetime, decimal, json, record, scalar};

impl ValuePlan {
    /// Appends the JSON for one non-null value's text. On error `out` is left as it was.
    pub fn write_json(&self, text: &[u8], out: &mut Vec<u8>) -> Result<(), ValueError> {
        let start = out.len();
        self.write_value(text, out).map_err(|kind| {
            out.truncate(start);
            self.error(kind)
        })
    }

    /// Appends `null` for a SQL NULL, or refuses it for a NOT NULL column.
    pub fn write_null(&self, out: &mut Vec<u8>) -> Result<(), ValueError> {
        self.write_null_kind(out).map_err(|kind| self.error(kind))
    }

    /// `write_json` or `write_null`, for a datum that may be NULL.
    pub fn write_datum(&self, datum: Option<&[u8]>, out: &mut Vec<u8>) -> Result<(), ValueError> {
        match datum {
            Some(text) => self.write_json(text, out),
            None => self.write_null(out),
        }
    }

    fn error(&self, kind: ValueErrorKind) -> ValueError {
        ValueError {
            pg_type: self.pg_name.clone(),
            target: self.target.to_string(),
            kind,
        }
    }

    pub(crate) fn write_null_kind(&self, out: &mut Vec<u8>) -> Result<(), ValueErrorKind> {
        if self.target.nullable {
            out.extend_from_slice(b"null");
            Ok(())
        } else {
            Err(ValueErrorKind::NullNotAllowed)
        }
    }

    /// Decodes into `out`; on error `out` may hold a partial value (callers truncate).
    pub(crate) fn write_value(&self, text: &[u8], out: &mut Vec<u8>) -> Result<(), ValueErrorKind> {
        let outcome = match &self.decode {
            Decode::Bool => scalar::write_bool(text, out)?,
            Decode::Int { min, max } => scalar::write_int(text, *min, *max, out)?,
            Decode::Float => scalar::write_float(text, out)?,
            Decode::Float4AsDouble => scalar::write_float4_as_double(text, out)?,
            Decode::Decimal { precision, scale } => {
                decimal::write_decimal(text, *precision, *scale, out)?
            }
            Decode::Text => scalar::write_text(text, out)?,
            Decode::Bytea => scalar::write_bytea(text, out)?,
            Decode::Temporal(kind) => datetime::write_temporal(*kind, text, out)?,
            Decode::Uuid => scalar::write_uuid(text, out)?,
            Decode::Variant => {
                json::write_variant(text, out)?;
                Outcome::Written
            }
            Decode::Array {
                dimensions,
                delimiter,
                element,
            } => {
                array::write_array(text, *dimensions, *delimiter, element, out)?;
                Outcome::Written
            }
            Decode::Composite { members } => {
                record::write_record(text, members, out)?;
                Outcome::Written
            }
        };
        match outcome {
            Outcome::Written => Ok(()),
            Outcome::Null { .. } if self.target.nullable => {
                out.extend_from_slice(b"null");
                Ok(())
            }
            Outcome::Null { why } => Err(ValueErrorKind::unrepresentable(text, why)),
        }
    }
}
