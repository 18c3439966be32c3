//! Tokenizing and parsing the ad-hoc SQL subset the double answers (the grammar is
//! [`GRAMMAR`]); `query` runs what this produces.
//!
//! Owns: the syntax tree and the spelling rules of Feldera's ad-hoc engine that matter
//! here: unquoted names fold to lowercase, `"quoted"` ones keep their case (`""` inside is a
//! quote), strings are single-quoted with `''` and no backslash escapes, `X'..'` is binary.
//! Anything else is refused with a message naming the grammar. Never sees tables.

use super::schema::Ident;

pub const GRAMMAR: &str = "the double understands only `SELECT * | COUNT(*) [AS a] | item, ... \
FROM t [WHERE cond] [ORDER BY col [ASC|DESC], ...] [LIMIT n]`, where an item is `col [AS a]` \
or `CAST(col AS VARCHAR) AS a`, a col may be qualified (`t.col`), and cond combines \
`operand op operand` (op: = <> != < <= > >=; operands: columns, integers, 'strings', TRUE, \
FALSE, X'hex', CAST('text' AS type), DATE/TIME/TIMESTAMP 'text') with AND, OR and parentheses";

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub select: Select,
    pub table: Ident,
    pub filter: Option<Expr>,
    pub order_by: Vec<(ColumnRef, Direction)>,
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Select {
    All,
    Count { alias: Option<Ident> },
    Items(Vec<Item>),
}

/// One select-list item and its output name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub column: ColumnRef,
    /// `CAST(col AS VARCHAR)`.
    pub as_text: bool,
    pub alias: Option<Ident>,
}

/// A column, optionally qualified by the table name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnRef {
    pub table: Option<Ident>,
    pub column: Ident,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Asc,
    Desc,
}

/// A WHERE condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    Or(Vec<Expr>),
    And(Vec<Expr>),
    Compare(Operand, CmpOp, Operand),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operand {
    Column(ColumnRef),
    Literal(Literal),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Literal {
    /// An integer or decimal number as written, sign included.
    Number(String),
    Str(String),
    Bool(bool),
    Bytes(Vec<u8>),
    /// `CAST('text' AS type)` or `TYPE 'text'`.
    Typed(String, CastType),
}

/// A type named in a CAST.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CastType {
    Integer,
    Boolean,
    Varchar,
    Date,
    Time,
    Timestamp,
    Decimal { precision: u32, scale: u32 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Str(String),
    Hex(String),
    Number(String),
    Symbol(&'static str),
}

const SYMBOLS: [&str; 14] = [
    "<>", "!=", "<=", ">=", "=", "<", ">", "*", ",", "(", ")", ";", ".", "-",
];

fn tokenize(sql: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut rest = sql;
    while let Some(c) = rest.chars().next() {
        if c.is_whitespace() {
            rest = &rest[c.len_utf8()..];
        } else if (c == 'x' || c == 'X') && rest[1..].starts_with('\'') {
            let (text, after) = quoted(&rest[1..], '\'')?;
            tokens.push(Token::Hex(text));
            rest = after;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            tokens.push(Token::Word(rest[..end].to_owned()));
            rest = &rest[end..];
        } else if c.is_ascii_digit() {
            let end = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(rest.len());
            tokens.push(Token::Number(rest[..end].to_owned()));
            rest = &rest[end..];
        } else if c == '"' || c == '\'' {
            let (text, after) = quoted(rest, c)?;
            tokens.push(if c == '"' {
                Token::Quoted(text)
            } else {
                Token::Str(text)
            });
            rest = after;
        } else if let Some(symbol) = SYMBOLS.iter().find(|s| rest.starts_with(**s)) {
            tokens.push(Token::Symbol(symbol));
            rest = &rest[symbol.len()..];
        } else {
            return Err(format!("unexpected character `{c}`: {GRAMMAR}"));
        }
    }
    Ok(tokens)
}

/// The text between `quote`s at the start of `text` (a doubled quote stands for one) and
/// what follows the closing quote.
fn quoted(text: &str, quote: char) -> Result<(String, &str), String> {
    let mut out = String::new();
    let mut chars = text.char_indices().skip(1).peekable();
    while let Some((i, c)) = chars.next() {
        if c != quote {
            out.push(c);
        } else if chars.peek().map(|(_, c)| *c) == Some(quote) {
            chars.next();
            out.push(quote);
        } else {
            return Ok((out, &text[i + c.len_utf8()..]));
        }
    }
    Err(format!("unterminated {quote}...{quote}: {GRAMMAR}"))
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.pos).cloned();
        self.pos += usize::from(token.is_some());
        token
    }

    fn keyword(&mut self, kw: &str) -> bool {
        let hit = matches!(self.peek(), Some(Token::Word(w)) if w.eq_ignore_ascii_case(kw));
        self.pos += usize::from(hit);
        hit
    }

    fn symbol(&mut self, s: &'static str) -> bool {
        let hit = self.peek() == Some(&Token::Symbol(s));
        self.pos += usize::from(hit);
        hit
    }

    fn expect_keyword(&mut self, kw: &str) -> Result<(), String> {
        self.keyword(kw)
            .then_some(())
            .ok_or_else(|| format!("expected `{kw}`: {GRAMMAR}"))
    }

    fn expect_symbol(&mut self, s: &'static str) -> Result<(), String> {
        self.symbol(s)
            .then_some(())
            .ok_or_else(|| format!("expected `{s}`: {GRAMMAR}"))
    }

    fn ident(&mut self) -> Result<Ident, String> {
        match self.next() {
            Some(Token::Word(w)) if !is_reserved(&w) => Ok(Ident::Unquoted(w)),
            Some(Token::Quoted(q)) => Ok(Ident::Quoted(q)),
            _ => Err(format!("expected a name: {GRAMMAR}")),
        }
    }

    fn column_ref(&mut self) -> Result<ColumnRef, String> {
        let first = self.ident()?;
        if self.symbol(".") {
            return Ok(ColumnRef {
                table: Some(first),
                column: self.ident()?,
            });
        }
        Ok(ColumnRef {
            table: None,
            column: first,
        })
    }

    fn alias(&mut self) -> Result<Option<Ident>, String> {
        if self.keyword("as") {
            return self.ident().map(Some);
        }
        Ok(None)
    }

    fn select(&mut self) -> Result<Select, String> {
        if self.symbol("*") {
            return Ok(Select::All);
        }
        let save = self.pos;
        if self.keyword("count") && self.symbol("(") && self.symbol("*") && self.symbol(")") {
            return Ok(Select::Count {
                alias: self.alias()?,
            });
        }
        self.pos = save;
        let mut items = vec![self.item()?];
        while self.symbol(",") {
            items.push(self.item()?);
        }
        Ok(Select::Items(items))
    }

    fn item(&mut self) -> Result<Item, String> {
        if self.keyword("cast") {
            self.expect_symbol("(")?;
            let column = self.column_ref()?;
            self.expect_keyword("as")?;
            if self.cast_type()? != CastType::Varchar {
                return Err(format!(
                    "only CAST(col AS VARCHAR) is a select item: {GRAMMAR}"
                ));
            }
            self.expect_symbol(")")?;
            let alias = self.alias()?;
            if alias.is_none() {
                return Err(format!("CAST(col AS VARCHAR) needs an alias: {GRAMMAR}"));
            }
            return Ok(Item {
                column,
                as_text: true,
                alias,
            });
        }
        Ok(Item {
            column: self.column_ref()?,
            as_text: false,
            alias: self.alias()?,
        })
    }

    fn cast_type(&mut self) -> Result<CastType, String> {
        let Some(Token::Word(word)) = self.next() else {
            return Err(format!("expected a type: {GRAMMAR}"));
        };
        let ty = match word.to_ascii_uppercase().as_str() {
            "TINYINT" | "SMALLINT" | "INT" | "INTEGER" | "BIGINT" => CastType::Integer,
            "BOOLEAN" => CastType::Boolean,
            "VARCHAR" | "TEXT" | "STRING" => CastType::Varchar,
            "DATE" => CastType::Date,
            "TIME" => CastType::Time,
            "TIMESTAMP" => {
                if self.symbol("(") {
                    self.number()?;
                    self.expect_symbol(")")?;
                }
                if self.keyword("with") {
                    self.expect_keyword("time")?;
                    self.expect_keyword("zone")?;
                }
                CastType::Timestamp
            }
            "DECIMAL" | "NUMERIC" => {
                let (mut precision, mut scale) = (38, 0);
                if self.symbol("(") {
                    precision = self.number()?;
                    if self.symbol(",") {
                        scale = self.number()?;
                    }
                    self.expect_symbol(")")?;
                }
                CastType::Decimal { precision, scale }
            }
            _ => return Err(format!("the double does not cast to `{word}`: {GRAMMAR}")),
        };
        Ok(ty)
    }

    fn number(&mut self) -> Result<u32, String> {
        match self.next() {
            Some(Token::Number(n)) => n.parse().map_err(|_| format!("`{n}` is not a count")),
            _ => Err(format!("expected a number: {GRAMMAR}")),
        }
    }

    fn or_expr(&mut self) -> Result<Expr, String> {
        let mut terms = vec![self.and_expr()?];
        while self.keyword("or") {
            terms.push(self.and_expr()?);
        }
        Ok(if terms.len() == 1 {
            terms.remove(0)
        } else {
            Expr::Or(terms)
        })
    }

    fn and_expr(&mut self) -> Result<Expr, String> {
        let mut terms = vec![self.primary()?];
        while self.keyword("and") {
            terms.push(self.primary()?);
        }
        Ok(if terms.len() == 1 {
            terms.remove(0)
        } else {
            Expr::And(terms)
        })
    }

    fn primary(&mut self) -> Result<Expr, String> {
        if self.symbol("(") {
            let inner = self.or_expr()?;
            self.expect_symbol(")")?;
            return Ok(inner);
        }
        let left = self.operand()?;
        let op = match self.next() {
            Some(Token::Symbol("=")) => CmpOp::Eq,
            Some(Token::Symbol("<>" | "!=")) => CmpOp::Ne,
            Some(Token::Symbol("<")) => CmpOp::Lt,
            Some(Token::Symbol("<=")) => CmpOp::Le,
            Some(Token::Symbol(">")) => CmpOp::Gt,
            Some(Token::Symbol(">=")) => CmpOp::Ge,
            _ => return Err(format!("expected a comparison: {GRAMMAR}")),
        };
        Ok(Expr::Compare(left, op, self.operand()?))
    }

    fn operand(&mut self) -> Result<Operand, String> {
        let literal = match self.peek().cloned() {
            Some(Token::Str(s)) => Literal::Str(s),
            Some(Token::Hex(h)) => Literal::Bytes(hex(&h)?),
            Some(Token::Number(n)) => Literal::Number(n),
            Some(Token::Symbol("-")) => {
                self.pos += 1;
                match self.peek().cloned() {
                    Some(Token::Number(n)) => Literal::Number(format!("-{n}")),
                    _ => return Err(format!("expected a number after `-`: {GRAMMAR}")),
                }
            }
            Some(Token::Word(w)) if w.eq_ignore_ascii_case("true") => Literal::Bool(true),
            Some(Token::Word(w)) if w.eq_ignore_ascii_case("false") => Literal::Bool(false),
            Some(Token::Word(w)) if w.eq_ignore_ascii_case("cast") => {
                self.pos += 1;
                self.expect_symbol("(")?;
                let Some(Token::Str(text)) = self.next() else {
                    return Err(format!(
                        "the double casts only 'string' literals: {GRAMMAR}"
                    ));
                };
                self.expect_keyword("as")?;
                let ty = self.cast_type()?;
                self.expect_symbol(")")?;
                return Ok(Operand::Literal(Literal::Typed(text, ty)));
            }
            Some(Token::Word(w))
                if is_typed_string(&w)
                    && matches!(self.tokens.get(self.pos + 1), Some(Token::Str(_))) =>
            {
                let ty = self.cast_type()?;
                let Some(Token::Str(text)) = self.next() else {
                    return Err(format!("expected a 'string' after {w}: {GRAMMAR}"));
                };
                return Ok(Operand::Literal(Literal::Typed(text, ty)));
            }
            _ => return self.column_ref().map(Operand::Column),
        };
        self.pos += 1;
        Ok(Operand::Literal(literal))
    }

    fn order_by(&mut self) -> Result<Vec<(ColumnRef, Direction)>, String> {
        let mut items = Vec::new();
        if !self.keyword("order") {
            return Ok(items);
        }
        self.expect_keyword("by")?;
        loop {
            let col = self.column_ref()?;
            let dir = if self.keyword("desc") {
                Direction::Desc
            } else {
                self.keyword("asc");
                Direction::Asc
            };
            items.push((col, dir));
            if !self.symbol(",") {
                return Ok(items);
            }
        }
    }
}

fn is_reserved(word: &str) -> bool {
    const RESERVED: [&str; 14] = [
        "select", "from", "where", "order", "by", "limit", "as", "and", "or", "asc", "desc",
        "cast", "true", "false",
    ];
    RESERVED.iter().any(|r| word.eq_ignore_ascii_case(r))
}

fn is_typed_string(word: &str) -> bool {
    ["date", "time", "timestamp"]
        .iter()
        .any(|t| word.eq_ignore_ascii_case(t))
}

fn hex(text: &str) -> Result<Vec<u8>, String> {
    if text.len() % 2 != 0 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("X'{text}' is not hex bytes"));
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).map_err(|e| e.to_string()))
        .collect()
}

/// Parses the supported subset.
pub fn parse(sql: &str) -> Result<Query, String> {
    let mut p = Parser {
        tokens: tokenize(sql)?,
        pos: 0,
    };
    p.expect_keyword("select")?;
    let select = p.select()?;
    p.expect_keyword("from")?;
    let table = p.ident()?;
    let filter = if p.keyword("where") {
        Some(p.or_expr()?)
    } else {
        None
    };
    let order_by = p.order_by()?;
    let limit = if p.keyword("limit") {
        Some(p.number()? as usize)
    } else {
        None
    };
    p.symbol(";");
    if p.peek().is_some() {
        return Err(format!("unexpected text after the query: {GRAMMAR}"));
    }
    Ok(Query {
        select,
        table,
        filter,
        order_by,
        limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str) -> ColumnRef {
        ColumnRef {
            table: None,
            column: Ident::Unquoted(name.into()),
        }
    }

    #[test]
    fn parses_columns_order_and_folds_unquoted_names() {
        let q = parse("select ID, \"Name\" FROM T order by id desc, \"Name\";").unwrap();
        assert_eq!(q.table.folded(), "t");
        let Select::Items(items) = &q.select else {
            panic!("items")
        };
        assert_eq!(items[0].column, col("ID"));
        assert_eq!(items[1].column.column, Ident::Quoted("Name".into()));
        assert_eq!(q.order_by[0].1, Direction::Desc);
        assert_eq!(q.order_by[1].1, Direction::Asc);
        assert_eq!(
            parse("SELECT COUNT(*) FROM t").unwrap().select,
            Select::Count { alias: None }
        );
    }

    #[test]
    fn parses_the_keyset_page_shape() {
        let q = parse(
            "SELECT \"t\".\"a\" AS \"k0\", CAST(\"t\".\"d\" AS VARCHAR) AS \"k1\" FROM \"t\" \
             WHERE (\"t\".\"a\" > 'it''s') OR (\"t\".\"a\" = 'it''s' AND \"t\".\"d\" > \
             CAST('-1.10' AS DECIMAL(10, 2))) ORDER BY \"t\".\"a\", \"t\".\"d\" LIMIT 500",
        )
        .unwrap();
        assert_eq!(q.limit, Some(500));
        let Some(Expr::Or(branches)) = &q.filter else {
            panic!("an OR: {:?}", q.filter)
        };
        assert_eq!(
            branches[0],
            Expr::Compare(
                Operand::Column(ColumnRef {
                    table: Some(Ident::Quoted("t".into())),
                    column: Ident::Quoted("a".into()),
                }),
                CmpOp::Gt,
                Operand::Literal(Literal::Str("it's".into()))
            )
        );
        let Expr::And(terms) = &branches[1] else {
            panic!("an AND")
        };
        assert_eq!(
            terms[1],
            Expr::Compare(
                Operand::Column(ColumnRef {
                    table: Some(Ident::Quoted("t".into())),
                    column: Ident::Quoted("d".into()),
                }),
                CmpOp::Gt,
                Operand::Literal(Literal::Typed(
                    "-1.10".into(),
                    CastType::Decimal {
                        precision: 10,
                        scale: 2
                    }
                ))
            )
        );
        let Select::Items(items) = &q.select else {
            panic!("items")
        };
        assert!(items[1].as_text);
        assert_eq!(items[1].alias, Some(Ident::Quoted("k1".into())));
    }

    #[test]
    fn literals_of_every_form() {
        let rhs = |cond: &str| match parse(&format!("SELECT * FROM t WHERE a = {cond}")) {
            Ok(Query {
                filter: Some(Expr::Compare(_, _, Operand::Literal(l))),
                ..
            }) => Ok(l),
            other => Err(format!("{other:?}")),
        };
        assert_eq!(
            rhs("-9223372036854775808"),
            Ok(Literal::Number("-9223372036854775808".into()))
        );
        assert_eq!(rhs("X'00aB'"), Ok(Literal::Bytes(vec![0, 0xab])));
        assert_eq!(rhs("x''"), Ok(Literal::Bytes(vec![])));
        assert_eq!(rhs("TRUE"), Ok(Literal::Bool(true)));
        assert_eq!(
            rhs("'a\\b'"),
            Ok(Literal::Str("a\\b".into())),
            "no backslash escapes"
        );
        assert_eq!(
            rhs("CAST('0001-01-01 00:00:00' AS TIMESTAMP(6))"),
            Ok(Literal::Typed(
                "0001-01-01 00:00:00".into(),
                CastType::Timestamp
            ))
        );
        assert_eq!(
            rhs("DATE '2024-01-01'"),
            Ok(Literal::Typed("2024-01-01".into(), CastType::Date))
        );
        assert!(rhs("X'abc'").is_err(), "odd hex");
    }

    #[test]
    fn anything_else_is_refused_with_the_grammar() {
        for sql in [
            "DELETE FROM t",
            "SELECT 1 + 1 FROM t",
            "SELECT * FROM t WHERE a IN (1, 2)",
            "SELECT * FROM t WHERE (a, b) > (1, 2)",
            "SELECT * FROM t WHERE a = 'unterminated",
            "SELECT CAST(a AS VARCHAR) FROM t",
            "SELECT * FROM t LIMIT -1",
            "SELECT * FROM t; SELECT * FROM t",
        ] {
            let err = parse(sql).unwrap_err();
            assert!(
                err.contains("understands only") || err.contains("not"),
                "{sql}: {err}"
            );
        }
    }
}
