//! Planning a query of the ad-hoc SQL subset that `query_parse` reads over the double's
//! tables: the snapshot of the rows it reads, its condition, its order and the encoding of
//! its answer rows (Feldera's query encoding, explicit nulls). `scan` runs a plan.
//!
//! Owns: name resolution (the table, qualified columns, select aliases), coercion of
//! literals to their column's type, comparison and ordering as Feldera's query engine does
//! them (strings and bytes bytewise, decimals by value, TIMESTAMP_TZ as instants, NULL never
//! matching a comparison and sorting last), and the names of the answer's columns (the
//! alias, else the column's schema name, `count(*)` for an unaliased count). Never mutates
//! tables, never decides what a query costs (`scan` does).

use std::cmp::Ordering;

use serde_json::Value as Json;

use super::query_parse::{
    parse, CastType, CmpOp, ColumnRef, Direction, Expr, Literal, Operand, Query, Select,
};
use super::schema::{ColumnType, Ident, Relation, Schema, TypeKind};
use super::table::TableState;
use super::temporal::{parse_date, parse_time, parse_timestamp};
use super::value::{to_query_json, to_query_text, Decimal, Float, Value};

/// A condition with its columns resolved and its literals typed.
enum Condition {
    Or(Vec<Condition>),
    And(Vec<Condition>),
    Compare(Side, CmpOp, Side),
}

enum Side {
    Column(usize),
    Value(Value),
}

/// What a query answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// One row, `{name: count}`.
    Count { name: String },
    /// One row per matching row, in `order` (none: the table's own order), at most `limit`.
    Rows {
        order: Vec<(usize, Direction)>,
        limit: Option<usize>,
    },
}

/// A query ready to run: the rows of its table as of the query's start (Feldera's ad-hoc
/// queries read a consistent snapshot), what it keeps and how it answers.
pub struct Plan {
    /// The relation's schema name.
    pub table: String,
    pub rows: Vec<Vec<Value>>,
    pub output: Output,
    rel: Relation,
    condition: Option<Condition>,
    /// Output name, column index and whether the value is cast to VARCHAR, per answer
    /// column.
    columns: Vec<(String, usize, bool)>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("table", &self.table)
            .field("rows", &self.rows.len())
            .field("output", &self.output)
            .finish()
    }
}

/// Plans `sql` over the inputs' current state; materialized outputs exist but hold no rows
/// (the double runs no views). Returns the relation the query named, when it named one
/// that exists (also when the query is refused), and the plan or why there is none.
pub fn plan(
    schema: &Schema,
    tables: &[TableState],
    sql: &str,
) -> (Option<String>, Result<Plan, String>) {
    let q = match parse(sql) {
        Ok(q) => q,
        Err(e) => return (None, Err(e)),
    };
    let rel = match resolve_relation(schema, &q.table) {
        Ok(rel) => rel,
        Err(e) => return (None, Err(e)),
    };
    let name = rel.name.clone();
    (Some(name), plan_over(rel, schema, tables, &q))
}

fn plan_over(
    rel: &Relation,
    schema: &Schema,
    tables: &[TableState],
    q: &Query,
) -> Result<Plan, String> {
    if !rel.queryable() {
        return Err(format!(
            "Tried to SELECT from a non-materialized source. Make sure `{}` is configured as \
             materialized: use `with ('materialized' = 'true')` for tables, or `create \
             materialized view` for views",
            rel.name
        ));
    }
    let condition = q
        .filter
        .as_ref()
        .map(|filter| resolve_condition(rel, filter))
        .transpose()?;
    let output = match &q.select {
        Select::Count { alias } => Output::Count {
            name: alias.as_ref().map_or("count(*)".to_owned(), Ident::folded),
        },
        _ => Output::Rows {
            order: resolve_order(rel, q)?,
            limit: q.limit,
        },
    };
    let columns = output_columns(rel, q)?;
    for (name, index, as_text) in &columns {
        let field = &rel.fields[*index];
        if *as_text && !castable_to_text(field.columntype.kind) {
            return Err(format!(
                "`{name}`: the double casts only integer, boolean, decimal, text and \
                 date-time columns to VARCHAR, not {:?} (`{}`)",
                field.columntype.kind, field.name
            ));
        }
    }
    let rows = schema
        .inputs
        .iter()
        .position(|r| r.name == rel.name)
        .and_then(|i| tables.get(i))
        .map(TableState::visible_rows)
        .unwrap_or_default();
    Ok(Plan {
        table: rel.name.clone(),
        rows,
        output,
        rel: rel.clone(),
        condition,
        columns,
    })
}

impl Plan {
    /// Whether the WHERE condition keeps `row` (no condition keeps every row).
    pub fn keeps(&self, row: &[Value]) -> bool {
        self.condition.as_ref().is_none_or(|c| holds(c, row))
    }

    /// `row` as one answer line, a JSON object without its newline.
    pub fn line(&self, row: &[Value]) -> Result<String, String> {
        let fields = self
            .columns
            .iter()
            .map(|(name, index, as_text)| {
                let field = &self.rel.fields[*index];
                let value = if *as_text {
                    match to_query_text(&row[*index], &field.columntype)? {
                        Some(text) => Json::String(text).to_string(),
                        None => "null".to_owned(),
                    }
                } else {
                    to_query_json(&row[*index], &field.columntype)
                };
                Ok(format!("{}:{value}", Json::String(name.clone())))
            })
            .collect::<Result<Vec<String>, String>>()?;
        Ok(format!("{{{}}}", fields.join(",")))
    }

    /// The answer line of a count.
    pub fn count_line(name: &str, count: u64) -> String {
        format!("{{{}:{count}}}", Json::String(name.to_owned()))
    }

    /// Rows `a` and `b` in the query's ORDER BY.
    pub fn order(&self, a: &[Value], b: &[Value]) -> Ordering {
        match &self.output {
            Output::Rows { order, .. } => compare_rows(a, b, order),
            Output::Count { .. } => Ordering::Equal,
        }
    }
}

/// What `CAST(col AS VARCHAR)` accepts (`value::to_query_text`), by column type.
fn castable_to_text(kind: TypeKind) -> bool {
    use TypeKind as K;
    !matches!(
        kind,
        K::Binary | K::Varbinary | K::Real | K::Double | K::Variant | K::Array | K::Map | K::Struct
    )
}

fn resolve_relation<'a>(schema: &'a Schema, name: &Ident) -> Result<&'a Relation, String> {
    schema
        .inputs
        .iter()
        .chain(&schema.outputs)
        .find(|r| r.matches(name))
        .ok_or_else(|| format!("table or view `{}` not found", name.folded()))
}

fn column(rel: &Relation, col: &ColumnRef) -> Result<usize, String> {
    if let Some(table) = &col.table {
        if !rel.matches(table) {
            return Err(format!(
                "`{}.{}` names table `{}`, but the query reads `{}`",
                table.folded(),
                col.column.folded(),
                table.folded(),
                rel.name
            ));
        }
    }
    rel.fields
        .iter()
        .position(|f| f.matches_ident(&col.column))
        .ok_or_else(|| {
            format!(
                "column `{}` not found in `{}`",
                col.column.folded(),
                rel.name
            )
        })
}

/// Output name, column index and whether the value is cast to VARCHAR, per answer column.
fn output_columns(rel: &Relation, q: &Query) -> Result<Vec<(String, usize, bool)>, String> {
    match &q.select {
        Select::Items(items) => items
            .iter()
            .map(|item| {
                let index = column(rel, &item.column)?;
                let name = match &item.alias {
                    Some(alias) => alias.folded(),
                    None => rel.fields[index].name.clone(),
                };
                Ok((name, index, item.as_text))
            })
            .collect(),
        _ => Ok(rel
            .fields
            .iter()
            .enumerate()
            .map(|(i, f)| (f.name.clone(), i, false))
            .collect()),
    }
}

/// ORDER BY columns: an unqualified name is a select alias first (as in the query engine),
/// then a column.
fn resolve_order(rel: &Relation, q: &Query) -> Result<Vec<(usize, Direction)>, String> {
    q.order_by
        .iter()
        .map(|(col, dir)| {
            if col.table.is_none() {
                if let Select::Items(items) = &q.select {
                    let aliased = items.iter().find(|item| {
                        item.alias
                            .as_ref()
                            .is_some_and(|a| a.folded() == col.column.folded())
                    });
                    if let Some(item) = aliased {
                        if item.as_text {
                            return Err(format!(
                                "the double does not order by the CAST alias `{}`",
                                col.column.folded()
                            ));
                        }
                        return column(rel, &item.column).map(|i| (i, *dir));
                    }
                }
            }
            column(rel, col).map(|i| (i, *dir))
        })
        .collect()
}

fn resolve_condition(rel: &Relation, expr: &Expr) -> Result<Condition, String> {
    let all = |terms: &[Expr]| {
        terms
            .iter()
            .map(|t| resolve_condition(rel, t))
            .collect::<Result<Vec<_>, _>>()
    };
    match expr {
        Expr::Or(terms) => Ok(Condition::Or(all(terms)?)),
        Expr::And(terms) => Ok(Condition::And(all(terms)?)),
        Expr::Compare(left, op, right) => {
            let side = |operand: &Operand, other: &Operand| -> Result<Side, String> {
                match (operand, other) {
                    (Operand::Column(c), _) => column(rel, c).map(Side::Column),
                    (Operand::Literal(lit), Operand::Column(c)) => {
                        let field = &rel.fields[column(rel, c)?];
                        coerce(lit, &field.columntype)
                            .map(Side::Value)
                            .map_err(|e| format!("column `{}`: {e}", field.name))
                    }
                    (Operand::Literal(_), Operand::Literal(_)) => Err(
                        "the double compares a column with a literal or a column, not two literals"
                            .to_owned(),
                    ),
                }
            };
            Ok(Condition::Compare(
                side(left, right)?,
                *op,
                side(right, left)?,
            ))
        }
    }
}

fn holds(condition: &Condition, row: &[Value]) -> bool {
    match condition {
        Condition::Or(terms) => terms.iter().any(|t| holds(t, row)),
        Condition::And(terms) => terms.iter().all(|t| holds(t, row)),
        Condition::Compare(left, op, right) => {
            let value = |side: &Side| match side {
                Side::Column(i) => row[*i].clone(),
                Side::Value(v) => v.clone(),
            };
            // NULL makes a comparison unknown, which never selects a row.
            let Some(ord) = compare(&value(left), &value(right)) else {
                return false;
            };
            match op {
                CmpOp::Eq => ord == Ordering::Equal,
                CmpOp::Ne => ord != Ordering::Equal,
                CmpOp::Lt => ord == Ordering::Less,
                CmpOp::Le => ord != Ordering::Greater,
                CmpOp::Gt => ord == Ordering::Greater,
                CmpOp::Ge => ord != Ordering::Less,
            }
        }
    }
}

/// The query engine's comparison; `None` when either side is NULL or the two cannot be
/// compared.
fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (instant(a), instant(b)) {
        (Value::Null, _) | (_, Value::Null) => None,
        (Value::Decimal(x), Value::Decimal(y)) => Some(compare_decimals(x, y)),
        (x, y) if std::mem::discriminant(&x) == std::mem::discriminant(&y) => Some(x.cmp(&y)),
        _ => None,
    }
}

/// TIMESTAMP_TZ values (held in UTC) compare as instants, with TIMESTAMP literals too.
fn instant(v: &Value) -> Value {
    match v {
        Value::TimestampTz(d, t) => Value::Timestamp(*d, *t),
        other => other.clone(),
    }
}

fn compare_decimals(x: Decimal, y: Decimal) -> Ordering {
    let scale = x.scale.max(y.scale);
    let rescale = |d: Decimal| {
        10i128
            .checked_pow(scale - d.scale)
            .and_then(|f| d.unscaled.checked_mul(f))
    };
    match (rescale(x), rescale(y)) {
        (Some(a), Some(b)) => a.cmp(&b),
        // Only a value past 38 digits overflows: it is the larger in magnitude.
        (None, _) if x.unscaled < 0 => Ordering::Less,
        (None, _) => Ordering::Greater,
        (_, None) if y.unscaled < 0 => Ordering::Greater,
        (_, None) => Ordering::Less,
    }
}

/// Ascending puts NULL last, descending first (the query engine's defaults).
fn compare_rows(a: &[Value], b: &[Value], order: &[(usize, Direction)]) -> Ordering {
    for &(i, dir) in order {
        let ord = match (&a[i], &b[i]) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Null, _) => Ordering::Greater,
            (_, Value::Null) => Ordering::Less,
            (x, y) => compare(x, y).unwrap_or(Ordering::Equal),
        };
        let ord = if dir == Direction::Desc {
            ord.reverse()
        } else {
            ord
        };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    Ordering::Equal
}

/// A literal as a value of the column type it is compared with, or why it cannot be.
fn coerce(lit: &Literal, ct: &ColumnType) -> Result<Value, String> {
    use TypeKind as K;
    let ints = matches!(ct.kind, K::TinyInt | K::SmallInt | K::Integer | K::BigInt);
    let text = matches!(ct.kind, K::Char | K::Varchar);
    let mismatch = || format!("cannot compare a {:?} column with {lit:?}", ct.kind);
    let int = |n: &str| n.parse::<i64>().map(Value::Int).map_err(|_| mismatch());
    match (lit, ct.kind) {
        (Literal::Number(n), _) if ints => int(n),
        (Literal::Number(n), K::Decimal) => decimal(n, None).ok_or_else(mismatch),
        (Literal::Number(n), K::Real | K::Double) => n
            .parse::<f64>()
            .map(|f| Value::Float(Float(f)))
            .map_err(|_| mismatch()),
        (Literal::Str(s), _) if text => Ok(Value::Str(s.clone())),
        (Literal::Str(s), K::Uuid) => Ok(Value::Uuid(s.clone())),
        (Literal::Str(s), K::Date | K::Time | K::Timestamp | K::TimestampTz) => {
            temporal(s, ct.kind)
        }
        (Literal::Bool(b), K::Boolean) => Ok(Value::Bool(*b)),
        (Literal::Bytes(b), K::Binary | K::Varbinary) => Ok(Value::Bytes(b.clone())),
        (Literal::Typed(t, CastType::Integer), _) if ints => int(t),
        (Literal::Typed(t, CastType::Decimal { scale, .. }), K::Decimal) => {
            decimal(t, Some(*scale)).ok_or_else(mismatch)
        }
        (Literal::Typed(t, CastType::Varchar), _) if text => Ok(Value::Str(t.clone())),
        (Literal::Typed(t, CastType::Varchar), K::Uuid) => Ok(Value::Uuid(t.clone())),
        (Literal::Typed(t, CastType::Boolean), K::Boolean) => match t.to_ascii_lowercase().as_str()
        {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(mismatch()),
        },
        (Literal::Typed(t, CastType::Date), K::Date)
        | (Literal::Typed(t, CastType::Time), K::Time)
        | (Literal::Typed(t, CastType::Timestamp), K::Timestamp | K::TimestampTz) => {
            temporal(t, ct.kind)
        }
        _ => Err(mismatch()),
    }
}

/// A date-time literal; TIMESTAMP and TIMESTAMP_TZ literals are read as UTC wall time
/// (`T` or a space, optionally `Z` or `+00:00`).
fn temporal(text: &str, kind: TypeKind) -> Result<Value, String> {
    match kind {
        TypeKind::Date => parse_date(text).map(Value::Date),
        TypeKind::Time => parse_time(text).map(Value::Time),
        _ => {
            let naive = text
                .strip_suffix('Z')
                .or_else(|| text.strip_suffix("+00:00"))
                .unwrap_or(text);
            let spaced = match (naive.get(..10), naive.get(11..)) {
                (Some(date), Some(time)) => format!("{date} {time}"),
                _ => naive.to_owned(),
            };
            parse_timestamp(&spaced).map(|(d, t)| Value::Timestamp(d, t))
        }
    }
}

/// `[-]digits[.digits]` exactly, at most 38 digits and, when given, at most `scale`
/// fraction digits.
fn decimal(text: &str, scale: Option<u32>) -> Option<Value> {
    let body = text.strip_prefix('-').unwrap_or(text);
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !digits(int) || !digits(frac) || body.ends_with('.') {
        return None;
    }
    if scale.is_some_and(|s| frac.len() > s as usize) {
        return None;
    }
    let magnitude: i128 = format!("{int}{frac}").parse().ok()?;
    Some(Value::Decimal(Decimal {
        unscaled: if text.starts_with('-') {
            -magnitude
        } else {
            magnitude
        },
        scale: frac.len() as u32,
    }))
}

#[cfg(test)]
mod tests {
    use super::super::temporal::parse_timestamp_tz;
    use super::*;

    fn dec(unscaled: i128, scale: u32) -> Value {
        Value::Decimal(Decimal { unscaled, scale })
    }

    #[test]
    fn decimals_compare_by_value_across_scales() {
        assert_eq!(compare(&dec(110, 2), &dec(11, 1)), Some(Ordering::Equal));
        assert_eq!(compare(&dec(-5, 2), &dec(0, 0)), Some(Ordering::Less));
        assert_eq!(compare(&dec(1000, 2), &dec(95, 1)), Some(Ordering::Greater));
        let huge = dec(99_999_999_999_999_999_999_999_999_999_999_999_999, 0);
        assert_eq!(compare(&huge, &dec(1, 38)), Some(Ordering::Greater));
    }

    #[test]
    fn null_compares_to_nothing_and_timestamps_tz_compare_as_instants() {
        assert_eq!(compare(&Value::Null, &Value::Int(1)), None);
        let tz = |text| {
            let (d, t) = parse_timestamp_tz(text).unwrap();
            Value::TimestampTz(d, t)
        };
        let (a, b) = (tz("2024-01-01T02:00:00+02:00"), tz("2024-01-01T00:00:00Z"));
        assert_eq!(compare(&a, &b), Some(Ordering::Equal));
    }

    #[test]
    fn literals_take_their_column_type() {
        let ct = |kind| ColumnType {
            kind,
            nullable: false,
            ..ColumnType::varchar()
        };
        assert_eq!(
            coerce(
                &Literal::Number("-9223372036854775808".into()),
                &ct(TypeKind::TinyInt)
            ),
            Ok(Value::Int(i64::MIN))
        );
        assert_eq!(
            coerce(
                &Literal::Typed(
                    "-1.10".into(),
                    CastType::Decimal {
                        precision: 10,
                        scale: 2
                    }
                ),
                &ct(TypeKind::Decimal)
            ),
            Ok(dec(-110, 2))
        );
        assert!(coerce(
            &Literal::Typed(
                "1.001".into(),
                CastType::Decimal {
                    precision: 10,
                    scale: 2
                }
            ),
            &ct(TypeKind::Decimal)
        )
        .is_err());
        assert!(matches!(
            coerce(
                &Literal::Typed("0001-01-01 00:00:00".into(), CastType::Timestamp),
                &ct(TypeKind::TimestampTz)
            ),
            Ok(Value::Timestamp(..))
        ));
        assert!(coerce(&Literal::Str("1".into()), &ct(TypeKind::BigInt)).is_err());
        assert!(coerce(&Literal::Bytes(vec![]), &ct(TypeKind::Varchar)).is_err());
    }
}
