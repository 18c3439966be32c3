//! Routes: which PostgreSQL table feeds which Feldera table, parsed from `TABLES` (or the pair
//! `PG_TABLE`/`FELDERA_TABLE`) and resolved against Feldera's schema.
//!
//! Owns the route syntax and PostgreSQL's identifier rules (unquoted names fold to lowercase,
//! quoted names keep case, `""` escapes a quote). Feldera names follow `names`. Never reads
//! the environment: the config module hands the strings in.

use crate::schema::names::json_key_collision;
use crate::schema::program::{Schema, Side, Table};
use crate::schema::types::Name;
use std::fmt;

/// What a route string may look like, for every error message.
pub const ACCEPTED: &str = "comma-separated items `pg_table[:feldera_table]`; pg_table is `name` or \
`schema.name` (schema defaults to public; unquoted names fold to lowercase, \"Quoted\" names keep \
their case) and feldera_table is one name (unquoted matches case-insensitively, \"Quoted\" exactly), \
e.g. `users,public.items:lineitems,orders:\"Orders\"`";

/// A PostgreSQL table, spelled as the catalog stores it (already folded or unquoted).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PgTable {
    pub schema: String,
    pub name: String,
}

impl PgTable {
    /// Whether a pgoutput Relation (namespace, name) is this table. pgoutput sends the exact
    /// catalog spelling, so the comparison is exact.
    pub fn is(&self, namespace: &str, name: &str) -> bool {
        self.schema == namespace && self.name == name
    }
}

impl fmt::Display for PgTable {
    /// Prints the name as SQL would need it (`public.users`, `"Sales"."Items"`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", pg_quote(&self.schema), pg_quote(&self.name))
    }
}

/// Quotes a PostgreSQL identifier unless it reads back unchanged without quotes.
pub fn pg_quote(ident: &str) -> String {
    let plain = ident
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && ident
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '$');
    if plain {
        ident.to_owned()
    } else {
        format!("\"{}\"", ident.replace('"', "\"\""))
    }
}

/// One configured route, before it is checked against Feldera's schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub source: PgTable,
    /// The Feldera table as the user spelled it (unquoted names kept lowercase).
    pub destination: Name,
}

/// A route whose destination exists: `table` is the schema's own description of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedRoute {
    pub source: PgTable,
    pub table: Table,
}

/// A route string or a route that cannot be used: says where, what and what is accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteError {
    /// The configuration variable(s) the value came from (`TABLES`, `PG_TABLE`, ...).
    pub variable: &'static str,
    pub problem: String,
    pub accepted: String,
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}; accepted: {}",
            self.variable, self.problem, self.accepted
        )
    }
}

impl std::error::Error for RouteError {}

fn syntax(variable: &'static str, problem: String) -> RouteError {
    RouteError {
        variable,
        problem,
        accepted: ACCEPTED.to_owned(),
    }
}

/// Parses `TABLES`.
pub fn parse_tables(text: &str) -> Result<Vec<Route>, RouteError> {
    const VAR: &str = "TABLES";
    let items = split_outside_quotes(text, ',')
        .ok_or_else(|| syntax(VAR, format!("`{text}` has an unbalanced double quote")))?;
    let mut routes: Vec<Route> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let item = item.trim();
        if item.is_empty() {
            return Err(syntax(VAR, format!("item {} of `{text}` is empty", i + 1)));
        }
        let route = parse_item(item)
            .map_err(|problem| syntax(VAR, format!("item {} `{item}`: {problem}", i + 1)))?;
        check_distinct(VAR, &routes, &route)?;
        routes.push(route);
    }
    Ok(routes)
}

/// Builds the single route of `PG_TABLE` (and optionally `FELDERA_TABLE`).
pub fn parse_pair(pg_table: &str, feldera_table: Option<&str>) -> Result<Route, RouteError> {
    let (source, default_destination) = parse_pg_table(pg_table.trim())
        .map_err(|p| syntax("PG_TABLE", format!("`{pg_table}`: {p}")))?;
    let destination = match feldera_table {
        None => default_destination,
        Some(text) => parse_feldera_table(text.trim())
            .map_err(|p| syntax("FELDERA_TABLE", format!("`{text}`: {p}")))?,
    };
    Ok(Route {
        source,
        destination,
    })
}

fn check_distinct(
    variable: &'static str,
    earlier: &[Route],
    route: &Route,
) -> Result<(), RouteError> {
    let accepted = "each PostgreSQL table and each Feldera table in one route at most".to_owned();
    if earlier.iter().any(|r| r.source == route.source) {
        return Err(RouteError {
            variable,
            problem: format!("PostgreSQL table {} is routed twice", route.source),
            accepted,
        });
    }
    if let Some(other) = earlier
        .iter()
        .find(|r| r.destination.same_as(&route.destination))
    {
        return Err(RouteError {
            variable,
            problem: format!(
                "Feldera table {} is the destination of both {} and {}",
                route.destination, other.source, route.source
            ),
            accepted,
        });
    }
    Ok(())
}

fn parse_item(item: &str) -> Result<Route, String> {
    let parts = split_outside_quotes(item, ':').ok_or("unbalanced double quote")?;
    match parts.as_slice() {
        [pg] => {
            let (source, destination) = parse_pg_table(pg.trim())?;
            Ok(Route {
                source,
                destination,
            })
        }
        [pg, feldera] => Ok(Route {
            source: parse_pg_table(pg.trim())?.0,
            destination: parse_feldera_table(feldera.trim())?,
        }),
        _ => Err("more than one `:` outside quotes".to_owned()),
    }
}

/// The PostgreSQL table, and the Feldera name used when no destination is given: the table
/// name spelled the same way (quoted stays quoted).
fn parse_pg_table(text: &str) -> Result<(PgTable, Name), String> {
    let parts = split_outside_quotes(text, '.').ok_or("unbalanced double quote")?;
    let (schema, table) = match parts.as_slice() {
        [table] => (None, parse_ident(table, "PostgreSQL table")?),
        [schema, table] => (
            Some(parse_ident(schema, "PostgreSQL schema")?),
            parse_ident(table, "PostgreSQL table")?,
        ),
        _ => return Err("more than one `.` outside quotes in the PostgreSQL name".to_owned()),
    };
    let destination = if table.quoted {
        Name::quoted(&table.text)
    } else {
        Name::unquoted(&table.text.to_lowercase())
    };
    let source = PgTable {
        schema: schema.map_or_else(|| "public".to_owned(), Ident::pg_catalog_spelling),
        name: table.pg_catalog_spelling(),
    };
    Ok((source, destination))
}

fn parse_feldera_table(text: &str) -> Result<Name, String> {
    let parts = split_outside_quotes(text, '.').ok_or("unbalanced double quote")?;
    if parts.len() > 1 {
        return Err(format!(
            "Feldera table `{text}` has a `.`: Feldera has no schemas (quote the name if the dot is part of it)"
        ));
    }
    let ident = parse_ident(text, "Feldera table")?;
    Ok(if ident.quoted {
        Name::quoted(&ident.text)
    } else {
        Name::unquoted(&ident.text.to_lowercase())
    })
}

/// An identifier with its quotes removed.
struct Ident {
    text: String,
    quoted: bool,
}

impl Ident {
    /// PostgreSQL folds unquoted identifiers with ASCII lowercasing only.
    fn pg_catalog_spelling(self) -> String {
        if self.quoted {
            self.text
        } else {
            self.text.to_ascii_lowercase()
        }
    }
}

fn parse_ident(text: &str, what: &str) -> Result<Ident, String> {
    if text.is_empty() {
        return Err(format!("the {what} name is empty"));
    }
    if let Some(inner) = text.strip_prefix('"') {
        let Some(inner) = inner.strip_suffix('"') else {
            return Err(format!("{what} `{text}` has text after its closing quote"));
        };
        if inner.is_empty() {
            return Err(format!("the {what} name `{text}` is empty"));
        }
        // Inside quotes only doubled quotes may appear; a lone one ended the name early.
        if inner.replace("\"\"", "").contains('"') {
            return Err(format!("{what} `{text}` has text after its closing quote"));
        }
        return Ok(Ident {
            text: inner.replace("\"\"", "\""),
            quoted: true,
        });
    }
    let mut chars = text.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_alphabetic() || c == '_');
    let bad = text
        .chars()
        .find(|&c| !(c.is_alphanumeric() || c == '_' || c == '$'));
    match (first_ok, bad) {
        (true, None) => Ok(Ident {
            text: text.to_owned(),
            quoted: false,
        }),
        (_, Some(c)) => Err(format!(
            "unquoted {what} name `{text}` contains `{c}` (quote the name to use it)"
        )),
        (false, None) => Err(format!(
            "unquoted {what} name `{text}` starts with a digit (quote the name to use it)"
        )),
    }
}

/// Splits at `sep` outside double quotes; `None` when a quote is left open. A doubled quote
/// inside a quoted name closes and reopens the quote, which leaves the state right.
fn split_outside_quotes(text: &str, sep: char) -> Option<Vec<&str>> {
    let mut parts = Vec::new();
    let mut quoted = false;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if c == '"' {
            quoted = !quoted;
        } else if c == sep && !quoted {
            parts.push(text.get(start..i)?);
            start = i + c.len_utf8();
        }
    }
    if quoted {
        return None;
    }
    parts.push(text.get(start..)?);
    Some(parts)
}

/// Finds every route's destination among Feldera's tables.
pub fn resolve(routes: &[Route], schema: &Schema) -> Result<Vec<ResolvedRoute>, RouteError> {
    routes
        .iter()
        .map(|route| {
            resolve_one(route, schema).map(|table| ResolvedRoute {
                source: route.source.clone(),
                table: table.clone(),
            })
        })
        .collect()
}

fn resolve_one<'s>(route: &Route, schema: &'s Schema) -> Result<&'s Table, RouteError> {
    let wanted = &route.destination;
    if let Some(table) = schema.inputs.iter().find(|t| t.name.same_as(wanted)) {
        if let Some((a, b)) = json_key_collision(&table.fields) {
            return Err(RouteError {
                variable: "TABLES/FELDERA_TABLE",
                problem: format!(
                    "Feldera table {wanted} has columns {a} and {b}, whose names differ only in \
                     case: Feldera's JSON input finds a row's columns by their lowercase names, so \
                     it would give one column's values to the other or refuse the rows"
                ),
                accepted: "a destination table whose column names differ in more than case \
                           (rename one of them in the Feldera program)"
                    .to_owned(),
            });
        }
        return Ok(table);
    }
    let tables: Vec<String> = schema.inputs.iter().map(|t| t.name.to_string()).collect();
    let tables = if tables.is_empty() {
        "(the program has no tables)".to_owned()
    } else {
        tables.join(", ")
    };
    let accepted = format!("a table of the Feldera program: {tables}");
    let problem = if let Some(u) = schema.unreadable.iter().find(|u| u.name.same_as(wanted)) {
        match u.side {
            Side::Input => format!("Feldera table {wanted} cannot be used: {}", u.error),
            Side::Output => format!("{wanted} is a Feldera view, not a table"),
        }
    } else if schema.outputs.iter().any(|t| t.name.same_as(wanted)) {
        format!("{wanted} is a Feldera view, not a table")
    } else {
        format!(
            "Feldera has no table {wanted} (destination of {})",
            route.source
        )
    };
    Err(RouteError {
        variable: "TABLES/FELDERA_TABLE",
        problem,
        accepted,
    })
}

#[cfg(test)]
#[path = "routes_tests.rs"]
mod tests;
