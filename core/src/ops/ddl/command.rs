//! `slotline ddl`: one plain control connection reads the routed tables from the catalog
//! (the tables of `TABLES`, else those the publication publishes, partitions folded into
//! their root), each with the startup's own relation question narrowed to what the
//! publication publishes of it, and `ops::ddl`'s key question, then the types that are not builtin with the startup's types question; the
//! Feldera SQL (or schema JSON) goes out as one `Print`. Nothing is created or written.
//!
//! A table that is not found, a publication without tables and a PostgreSQL that cannot be
//! reached end it with exit 1, naming what failed, before anything is printed.

use super::render::{render_json, render_sql};
use super::tables::{
    key_columns_query, parse_key_columns, plan_table, publication_routes, Described,
};
use crate::catalog::published;
use crate::catalog::questions::{self, PublishedTable, QualifiedName};
use crate::catalog::types::{parse_types, types_query};
use crate::config::{Config, ConfigError};
use crate::contract::routes::{PgTable, Route};
use crate::io::{exit, Command, Driver, Input};
use crate::ops::control::{connect_fix, deadline, now_of, with_rows, Control, Heard};
use crate::pipeline::env::Env;
use crate::pipeline::queue::Queue;
use crate::report::{with_fix, Format};
use crate::time::{Mono, Now};
use crate::timer::Deadline;
use crate::value::{oid, PgTypes};

/// How long `ddl` waits for all of its answers.
pub const DDL_TIMEOUT_MS: u64 = 30_000;

/// The question being answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Asked {
    Connecting,
    Publication,
    Relation(usize),
    Keys(usize),
    Types,
}

/// The `ddl` machine (see the module docs).
#[derive(Debug)]
pub struct Ddl {
    queue: Queue,
    env: Env,
    format: Format,
    deadline: Mono,
    control: Option<Control>,
    asked: Asked,
    routes: Vec<Route>,
    /// What the publication publishes (asked first, whether or not TABLES names the tables).
    published: Vec<PublishedTable>,
    described: Vec<Described>,
}

impl Ddl {
    pub fn new(config: Config, now: Now, format: Format) -> Result<Ddl, ConfigError> {
        let env = Env::for_ddl(config)?;
        let mut ddl = Ddl {
            queue: Queue::new(now),
            deadline: now.mono.plus_ms(DDL_TIMEOUT_MS),
            format,
            control: None,
            asked: Asked::Connecting,
            routes: env.routes.clone(),
            published: Vec::new(),
            described: Vec::new(),
            env,
        };
        match Control::open(&mut ddl.queue, &ddl.env, "slotline-ddl") {
            Ok(control) => ddl.control = Some(control),
            Err(e) => ddl.fail(format!("cannot connect to PostgreSQL: {e}")),
        }
        Ok(ddl)
    }

    /// Ends with exit 1 and `why` (with how to fix a connection problem).
    fn fail(&mut self, why: String) {
        if let Some(mut control) = self.control.take() {
            control.close(&mut self.queue);
        }
        let why = match self.asked {
            Asked::Connecting => with_fix(&why, &connect_fix(&self.env, &why)),
            _ => why,
        };
        self.queue.exit(exit::FATAL, format!("ddl: {why}"));
    }

    fn ask(&mut self, asked: Asked, sql: Option<String>) {
        self.asked = asked;
        let Some(sql) = sql else {
            return self.fail("a name contains a NUL byte".into());
        };
        let result = match self.control.as_mut() {
            Some(control) => control.ask(&mut self.queue, &sql),
            None => Err("no connection".into()),
        };
        if let Err(e) = result {
            self.fail(format!("cannot ask PostgreSQL: {e}"));
        }
    }

    fn ask_relation(&mut self, index: usize) {
        let Some(route) = self.routes.get(index) else {
            return self.ask_types();
        };
        let name = QualifiedName {
            schema: route.source.schema.clone(),
            table: route.source.name.clone(),
        };
        self.ask(Asked::Relation(index), questions::relation_query(&name));
    }

    /// The routed columns' types that are not builtin, each once, in OID order (the types
    /// question follows domains, arrays and composites from there).
    fn ask_types(&mut self) {
        let oids: std::collections::BTreeSet<u32> = self
            .described
            .iter()
            .flat_map(|d| d.relation.columns.iter().map(|c| c.type_oid))
            .filter(|t| !oid::is_builtin(*t))
            .collect();
        if oids.is_empty() {
            return self.finish(&PgTypes::new());
        }
        let oids: Vec<u32> = oids.into_iter().collect();
        self.ask(Asked::Types, Some(types_query(&oids)));
    }

    fn table_of(&self, index: usize) -> String {
        self.routes
            .get(index)
            .map_or_else(|| "a table".to_owned(), |r| r.source.to_string())
    }

    fn on_answer(&mut self, rows: &[Vec<Option<String>>]) -> Result<(), String> {
        match self.asked {
            Asked::Connecting => Ok(()),
            Asked::Publication => {
                self.published = with_rows(rows, questions::parse_published_tables)
                    .map_err(|e| e.to_string())?;
                if self.routes.is_empty() {
                    self.routes = publication_routes(&self.published);
                }
                if self.routes.is_empty() {
                    return Err(format!(
                        "publication {} publishes no tables, or does not exist in database {} \
                         (fix: CREATE PUBLICATION ... FOR TABLE ..., or name the tables with TABLES)",
                        self.env.config.publication, self.env.config.pg.database
                    ));
                }
                self.ask_relation(0);
                Ok(())
            }
            Asked::Relation(index) => {
                let mut relation =
                    with_rows(rows, questions::parse_relation).map_err(|e| e.to_string())?;
                let partitions =
                    with_rows(rows, questions::parse_partitions).map_err(|e| e.to_string())?;
                let route = self.routes.get(index).cloned().ok_or("no such route")?;
                let name = QualifiedName {
                    schema: route.source.schema.clone(),
                    table: route.source.name.clone(),
                };
                let published = published::published(&name, &self.published, &partitions)?;
                let left_out = published::narrow(&mut relation, &published);
                let sql = key_columns_query(&route.source.schema, &route.source.name);
                self.described.push(Described {
                    route,
                    relation,
                    columns: Vec::new(),
                    key_source: super::tables::KeySource::None,
                    partitions: partitions
                        .iter()
                        .filter(|p| p.leaf)
                        .map(|p| PgTable {
                            schema: p.relation.namespace.clone(),
                            name: p.relation.name.clone(),
                        })
                        .collect(),
                    published,
                    left_out,
                });
                self.ask(Asked::Keys(index), sql);
                Ok(())
            }
            Asked::Keys(index) => {
                let (columns, source) =
                    with_rows(rows, parse_key_columns).map_err(|e| e.to_string())?;
                if let Some(described) = self.described.get_mut(index) {
                    described.columns = columns;
                    described.key_source = source;
                }
                self.ask_relation(index + 1);
                Ok(())
            }
            Asked::Types => {
                let types = with_rows(rows, parse_types).map_err(|e| e.to_string())?;
                self.finish(&types);
                Ok(())
            }
        }
    }

    fn on_pg(&mut self, input: Input) {
        let Some(control) = self.control.as_mut() else {
            return;
        };
        match control.on_input(&mut self.queue, input) {
            Heard::Nothing => {}
            Heard::Ready => {
                let sql = questions::published_tables_query(&self.env.config.publication);
                self.ask(Asked::Publication, sql);
            }
            Heard::Answer(Ok(rows)) => {
                if let Err(why) = self.on_answer(&rows) {
                    self.fail(why);
                }
            }
            Heard::Answer(Err(error)) => {
                let why = match self.asked {
                    Asked::Relation(i) | Asked::Keys(i) => {
                        format!("cannot read table {}: {error}", self.table_of(i))
                    }
                    Asked::Publication => format!(
                        "cannot read publication {}: {error}",
                        self.env.config.publication
                    ),
                    Asked::Types | Asked::Connecting => {
                        format!("a catalog question failed: {error}")
                    }
                };
                self.fail(why);
            }
            Heard::Gone(why) => self.fail(format!("cannot ask PostgreSQL: {why}")),
        }
    }

    fn finish(&mut self, types: &PgTypes) {
        let tables: Vec<_> = self
            .described
            .iter()
            .map(|d| plan_table(d, types))
            .collect();
        let text = match self.format {
            Format::Json => render_json(&tables),
            Format::Text => render_sql(&tables),
        };
        if let Some(mut control) = self.control.take() {
            control.close(&mut self.queue);
        }
        self.queue.push(Command::Print { text });
        self.queue.exit(
            exit::OK,
            format!("ddl: {} table(s) described", tables.len()),
        );
    }
}

impl Driver for Ddl {
    fn handle(&mut self, now: Now, input: Input) {
        if self.queue.exited() {
            return;
        }
        now_of(&mut self.queue, now);
        if self.control.as_ref().is_some_and(|c| c.owns(&input)) {
            self.on_pg(input);
        } else if let Input::Shutdown = input {
            self.deadline = self.queue.now.mono;
        }
        if !self.queue.exited() && self.queue.now.mono >= self.deadline {
            self.fail(format!(
                "no complete answer from PostgreSQL within {} s",
                DDL_TIMEOUT_MS / 1000
            ));
        }
    }

    fn poll_command(&mut self) -> Option<Command> {
        self.queue.pop()
    }

    fn poll_timeout(&self) -> Option<Deadline> {
        deadline(&self.queue, self.deadline)
    }
}
