//! The ad-hoc query subset the double understands:
//! `SELECT * | COUNT(*) | col, ... FROM table [ORDER BY col [ASC|DESC], ...] [;]`,
//! answered as NDJSON in Feldera's query encoding with explicit nulls.
//!
//! Owns: tokenizing, parsing and running that subset. Unquoted names fold to lowercase;
//! `"quoted"` names keep their case. Anything else is refused with a message that says
//! what the double understands. Never mutates tables.

use std::cmp::Ordering;

use serde_json::Value as Json;

use super::schema::{Ident, Relation, Schema};
use super::table::TableState;
use super::value::{to_query_json, Value};

const GRAMMAR: &str =
    "the double understands only `SELECT * | COUNT(*) | col, ... FROM table [ORDER BY col [ASC|DESC], ...]`";

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub select: Select,
    pub table: Ident,
    pub order_by: Vec<(Ident, Direction)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Select {
    All,
    Count,
    Columns(Vec<Ident>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Asc,
    Desc,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Symbol(char),
}

fn tokenize(sql: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c.is_ascii_alphabetic() || c == '_' {
            let mut word = String::new();
            while let Some(&c) = chars
                .peek()
                .filter(|c| c.is_ascii_alphanumeric() || **c == '_')
            {
                word.push(c);
                chars.next();
            }
            tokens.push(Token::Word(word));
        } else if c == '"' {
            chars.next();
            let mut name = String::new();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        name.push('"');
                    }
                    Some('"') => break,
                    Some(c) => name.push(c),
                    None => return Err("unterminated quoted identifier".to_string()),
                }
            }
            tokens.push(Token::Quoted(name));
        } else if "*,();".contains(c) {
            chars.next();
            tokens.push(Token::Symbol(c));
        } else {
            return Err(format!("unexpected character `{c}`: {GRAMMAR}"));
        }
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn keyword(&mut self, kw: &str) -> bool {
        let hit = matches!(self.peek(), Some(Token::Word(w)) if w.eq_ignore_ascii_case(kw));
        self.pos += usize::from(hit);
        hit
    }

    fn symbol(&mut self, s: char) -> bool {
        let hit = self.peek() == Some(&Token::Symbol(s));
        self.pos += usize::from(hit);
        hit
    }

    fn expect_keyword(&mut self, kw: &str) -> Result<(), String> {
        if self.keyword(kw) {
            Ok(())
        } else {
            Err(format!("expected `{kw}`: {GRAMMAR}"))
        }
    }

    fn ident(&mut self) -> Result<Ident, String> {
        let ident = match self.peek() {
            Some(Token::Word(w)) => Ident::Unquoted(w.clone()),
            Some(Token::Quoted(q)) => Ident::Quoted(q.clone()),
            _ => return Err(format!("expected a name: {GRAMMAR}")),
        };
        self.pos += 1;
        Ok(ident)
    }

    fn select_list(&mut self) -> Result<Select, String> {
        if self.symbol('*') {
            return Ok(Select::All);
        }
        let save = self.pos;
        if self.keyword("count") && self.symbol('(') && self.symbol('*') && self.symbol(')') {
            return Ok(Select::Count);
        }
        self.pos = save;
        let mut cols = vec![self.ident()?];
        while self.symbol(',') {
            cols.push(self.ident()?);
        }
        Ok(Select::Columns(cols))
    }

    fn order_by(&mut self) -> Result<Vec<(Ident, Direction)>, String> {
        let mut items = Vec::new();
        if !self.keyword("order") {
            return Ok(items);
        }
        self.expect_keyword("by")?;
        loop {
            let col = self.ident()?;
            let dir = if self.keyword("desc") {
                Direction::Desc
            } else {
                self.keyword("asc");
                Direction::Asc
            };
            items.push((col, dir));
            if !self.symbol(',') {
                return Ok(items);
            }
        }
    }
}

/// Parses the supported subset.
pub fn parse(sql: &str) -> Result<Query, String> {
    let mut p = Parser {
        tokens: tokenize(sql)?,
        pos: 0,
    };
    p.expect_keyword("select")?;
    let select = p.select_list()?;
    p.expect_keyword("from")?;
    let table = p.ident()?;
    let order_by = p.order_by()?;
    p.symbol(';');
    if p.peek().is_some() {
        return Err(format!("unexpected text after the query: {GRAMMAR}"));
    }
    Ok(Query {
        select,
        table,
        order_by,
    })
}

/// Runs `sql` over the inputs' current state; materialized outputs exist but hold no rows
/// (the double runs no views). Returns one JSON object text per result row.
pub fn run(schema: &Schema, tables: &[TableState], sql: &str) -> Result<Vec<String>, String> {
    let q = parse(sql)?;
    let (rel, rows) = resolve_table(schema, tables, &q.table)?;
    if !rel.queryable() {
        return Err(format!(
            "table `{}` cannot be queried ad hoc: it has no primary key and is not materialized",
            rel.name
        ));
    }
    let mut rows = rows;
    if q.select == Select::Count {
        return Ok(vec![format!("{{\"count(*)\":{}}}", rows.len())]);
    }
    let columns = match &q.select {
        Select::Columns(cols) => cols
            .iter()
            .map(|c| column(rel, c))
            .collect::<Result<_, _>>()?,
        _ => (0..rel.fields.len()).collect::<Vec<usize>>(),
    };
    let order: Vec<(usize, Direction)> = q
        .order_by
        .iter()
        .map(|(c, d)| column(rel, c).map(|i| (i, *d)))
        .collect::<Result<_, _>>()?;
    rows.sort_by(|a, b| compare(a, b, &order));
    Ok(rows
        .iter()
        .map(|row| {
            let fields: Vec<String> = columns
                .iter()
                .map(|&i| {
                    let f = &rel.fields[i];
                    format!(
                        "{}:{}",
                        Json::String(f.name.clone()),
                        to_query_json(&row[i], &f.columntype)
                    )
                })
                .collect();
            format!("{{{}}}", fields.join(","))
        })
        .collect())
}

fn resolve_table<'a>(
    schema: &'a Schema,
    tables: &[TableState],
    name: &Ident,
) -> Result<(&'a Relation, Vec<Vec<Value>>), String> {
    if let Some(i) = schema.inputs.iter().position(|r| r.matches(name)) {
        let rows = tables
            .get(i)
            .map(TableState::visible_rows)
            .unwrap_or_default();
        return Ok((&schema.inputs[i], rows));
    }
    match schema.outputs.iter().find(|r| r.matches(name)) {
        Some(rel) => Ok((rel, Vec::new())),
        None => Err(format!("table or view `{}` not found", name.folded())),
    }
}

fn column(rel: &Relation, ident: &Ident) -> Result<usize, String> {
    rel.fields
        .iter()
        .position(|f| f.matches_ident(ident))
        .ok_or_else(|| format!("column `{}` not found in `{}`", ident.folded(), rel.name))
}

/// SQL ordering: NULLS LAST for ascending, NULLS FIRST for descending (DataFusion's
/// defaults), i.e. NULL sorts as the largest value.
fn compare(a: &[Value], b: &[Value], order: &[(usize, Direction)]) -> Ordering {
    for &(i, dir) in order {
        let ord = match (&a[i], &b[i]) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Null, _) => Ordering::Greater,
            (_, Value::Null) => Ordering::Less,
            (x, y) => x.cmp(y),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_columns_order_and_folds_unquoted_names() {
        let q = parse("select ID, \"Name\" FROM T order by id desc, \"Name\";").unwrap();
        assert_eq!(q.table.folded(), "t");
        assert_eq!(
            q.select,
            Select::Columns(vec![
                Ident::Unquoted("ID".into()),
                Ident::Quoted("Name".into())
            ])
        );
        assert_eq!(q.order_by[0].1, Direction::Desc);
        assert_eq!(q.order_by[1].1, Direction::Asc);
        assert_eq!(
            parse("SELECT COUNT(*) FROM t").unwrap().select,
            Select::Count
        );
    }

    #[test]
    fn anything_else_is_refused_with_the_grammar() {
        for sql in [
            "SELECT * FROM t WHERE id = 1",
            "DELETE FROM t",
            "SELECT 1 + 1 FROM t",
        ] {
            let err = parse(sql).unwrap_err();
            assert!(err.contains("understands only"), "{sql}: {err}");
        }
    }
}
