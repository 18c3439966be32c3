//! The fake PostgreSQL: its tables, and how it answers what the pipeline sends it (the
//! startup's catalog questions, the snapshot's COPY, replication commands).

use super::script::Script;
use crate::io::ConnId;
use crate::pgoutput::{Relation, RelationColumn, ReplicaIdentity};
use crate::wire::backend::{
    Authentication, BackendKeyData, BackendMessage, CopyResponse, DataRow, RowDescription,
    TransactionStatus,
};
use crate::wire::testing::decode_status_update;
use crate::Lsn;
use bytes::Bytes;
use std::fmt::Write as _;

/// One table of the fake database.
#[derive(Clone, Debug)]
pub struct FakeTable {
    pub relation: Relation,
    /// What an initial snapshot copies (text values in column order, `None` for NULL).
    pub rows: Vec<Vec<Option<String>>>,
    /// Heap blocks the rows are spread over (row `i` lives in block `i * blocks / rows`).
    pub blocks: u64,
    /// `pg_class.reltuples` (`None`: never analyzed).
    pub estimated_rows: Option<u64>,
    /// When partitioned: its partitions at every depth (a partitioned table itself holds no
    /// rows; its leaves do).
    pub partitions: Vec<FakePartition>,
    /// Row-level security applies to the table for slotline's role (`row_security_active`).
    pub row_security: bool,
}

/// A partition of a fake partitioned table.
#[derive(Clone, Debug)]
pub struct FakePartition {
    /// Its own shape; its `rows` are in the partitioned table's column order (the order a
    /// copy selects them in).
    pub table: FakeTable,
    pub leaf: bool,
    /// The OID of the table it is a partition of.
    pub parent: u32,
}

impl FakeTable {
    /// `columns`: (name, type oid, part of the replica identity).
    pub fn new(
        oid: u32,
        name: &str,
        identity: ReplicaIdentity,
        columns: &[(&str, u32, bool)],
    ) -> FakeTable {
        FakeTable {
            relation: Relation {
                oid,
                namespace: "public".into(),
                name: name.into(),
                replica_identity: identity,
                columns: columns
                    .iter()
                    .map(|(n, t, k)| RelationColumn {
                        in_replica_identity: *k,
                        name: (*n).into(),
                        type_oid: *t,
                        type_modifier: -1,
                    })
                    .collect(),
            },
            rows: Vec::new(),
            blocks: 0,
            estimated_rows: None,
            partitions: Vec::new(),
            row_security: false,
        }
    }

    /// Row-level security applies to the table for slotline's role.
    pub fn with_row_security(mut self) -> FakeTable {
        self.row_security = true;
        self
    }

    /// Adds a partition below `parent` (this table's OID or a partitioned partition's).
    pub fn with_partition(mut self, table: FakeTable, leaf: bool, parent: u32) -> FakeTable {
        self.partitions.push(FakePartition {
            table,
            leaf,
            parent,
        });
        self
    }

    /// The heaps a copy reads: its leaves, or the table itself when it has no partitions.
    fn heaps(&self) -> Vec<&FakeTable> {
        if self.partitions.is_empty() {
            return vec![self];
        }
        self.partitions
            .iter()
            .filter(|p| p.leaf)
            .map(|p| &p.table)
            .collect()
    }

    /// The table holds `rows` in `blocks` heap blocks (estimated exactly).
    pub fn with_rows(mut self, rows: Vec<Vec<Option<String>>>, blocks: u64) -> FakeTable {
        self.estimated_rows = Some(rows.len() as u64);
        self.rows = rows;
        self.blocks = blocks;
        self
    }

    /// The rows whose block is in `[start, end)` (`end` `None`: to the end).
    fn rows_in(&self, start: u64, end: Option<u64>) -> impl Iterator<Item = &Vec<Option<String>>> {
        let count = self.rows.len().max(1) as u64;
        let blocks = self.blocks;
        self.rows.iter().enumerate().filter_map(move |(i, row)| {
            let block = i as u64 * blocks / count;
            (block >= start && end.is_none_or(|e| block < e)).then_some(row)
        })
    }
}

/// What the fake PostgreSQL answers during startup.
#[derive(Clone, Debug)]
pub struct FakePg {
    pub wal_sender_timeout: String,
    pub tables: Vec<FakeTable>,
    /// `None`: the slot does not exist yet.
    pub slot_confirmed: Option<Lsn>,
    pub truncate_published: bool,
    /// How many startup slot queries answer that another process still holds the slot.
    pub slot_busy_answers: u32,
    /// `IDENTIFY_SYSTEM`'s system identifier.
    pub system_id: String,
    /// The publication's `publish_via_partition_root`.
    pub via_root: bool,
    /// How many `CREATE_REPLICATION_SLOT ... TEMPORARY` answer that the slot exists.
    pub temporary_slot_taken: u32,
    /// `IDENTIFY_SYSTEM`'s timeline.
    pub timeline: u32,
    /// What `TIMELINE_HISTORY` answers (the history file's text; `None`: an error, as
    /// for a history file that is missing).
    pub timeline_history: Option<String>,
}

/// How the fake server answers an online copy (docs/online-copy.md): each chunk's snapshot
/// and committed-but-running xids, and where each watermark lands in the stream.
#[derive(Clone, Debug)]
pub struct FakeOnline {
    /// `pg_current_snapshot()` of the next chunks (`xmin:xmax:xip,...`).
    pub snapshot: String,
    /// The xids the committed-but-running question names.
    pub committed: Vec<u64>,
    /// Where the next watermark's message is written.
    pub next_watermark: Lsn,
    /// Watermarks are not carried by the stream until `Script::release_watermarks`.
    pub hold: bool,
    /// Watermark messages held back.
    pub held: Vec<(Lsn, String)>,
    /// The copier's role sees every backend's wait (`pg_read_all_stats`).
    pub sees_waits: bool,
    pub synchronous_standby_names: String,
}

impl Default for FakeOnline {
    fn default() -> Self {
        FakeOnline {
            snapshot: "100:100:".into(),
            committed: Vec::new(),
            next_watermark: Lsn(0x5000),
            hold: false,
            held: Vec::new(),
            sees_waits: true,
            synchronous_standby_names: String::new(),
        }
    }
}

/// How the fake server answers the slot-health question (the monitor's, `status`'s and
/// `check`'s).
#[derive(Clone, Debug)]
pub struct FakeSlotHealth {
    pub current_wal: Lsn,
    pub restart_lsn: Lsn,
    pub wal_status: String,
    /// `max_slot_wal_keep_size` in MB (`-1`: unlimited).
    pub keep_mb: i64,
    pub invalidation_reason: Option<String>,
    pub active_pid: Option<u32>,
}

impl Default for FakeSlotHealth {
    fn default() -> Self {
        FakeSlotHealth {
            current_wal: Lsn(0x1_0000_0000),
            restart_lsn: Lsn(0xFFFF_0000),
            wal_status: "reserved".into(),
            keep_mb: -1,
            invalidation_reason: None,
            active_pid: None,
        }
    }
}

impl Script {
    /// Decodes what the pipeline wrote to PostgreSQL and lets the fake server answer.
    pub(super) fn on_frontend(&mut self, conn: ConnId, bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() {
            let (message, tail) = split_frontend(rest);
            rest = tail;
            self.on_frontend_message(conn, message);
        }
    }

    fn on_frontend_message(&mut self, conn: ConnId, message: FrontendMessage<'_>) {
        let at = self.at();
        match message {
            FrontendMessage::Startup(params) => {
                self.note(format!("{at} -> {conn} startup {params}"));
                let mut answer = vec![BackendMessage::Authentication(Authentication::Ok)];
                for (name, value) in [
                    ("server_version", self.server_version.as_str()),
                    ("DateStyle", "ISO, MDY"),
                    ("TimeZone", "UTC"),
                    ("IntervalStyle", "postgres"),
                    ("client_encoding", "UTF8"),
                ] {
                    answer.push(BackendMessage::ParameterStatus {
                        name: name.into(),
                        value: value.into(),
                    });
                }
                answer.push(BackendMessage::BackendKeyData(BackendKeyData {
                    process_id: 42,
                    secret_key: Bytes::from_static(&[0, 0, 0, 1]),
                }));
                answer.push(BackendMessage::ReadyForQuery(TransactionStatus::Idle));
                self.send_backend(conn, &answer);
            }
            FrontendMessage::Query(sql) => {
                self.note(format!("{at} -> {conn} query {}", summarize_sql(sql)));
                let answer = self.answer_query(conn, sql);
                self.send_backend(conn, &answer);
            }
            FrontendMessage::Status(payload) => match decode_status_update(payload) {
                Some(update) => {
                    if !self.frozen {
                        self.confirmed = self.confirmed.max(update.flush);
                    }
                    let reply = if update.reply_requested { " reply" } else { "" };
                    self.note(format!(
                        "{at} -> {conn} status write={} flush={} apply={}{reply}",
                        update.write, update.flush, update.apply
                    ));
                }
                None => self.note(format!("{at} -> {conn} copydata ({} bytes)", payload.len())),
            },
            FrontendMessage::CopyDone => self.note(format!("{at} -> {conn} copydone")),
            FrontendMessage::Terminate => self.note(format!("{at} -> {conn} terminate")),
            FrontendMessage::Other(tag) => {
                self.note(format!("{at} -> {conn} message {:?}", char::from(tag)))
            }
        }
    }

    fn answer_query(&mut self, conn: ConnId, sql: &str) -> Vec<BackendMessage> {
        if sql == crate::wire::frontend::DISABLE_TRANSACTION_TIMEOUT {
            return vec![
                BackendMessage::CommandComplete { tag: "SET".into() },
                BackendMessage::ReadyForQuery(TransactionStatus::Idle),
            ];
        }
        if let Some(answer) = self
            .answer_online_copy(sql)
            .or_else(|| self.answer_snapshot_query(sql))
        {
            return answer;
        }
        let rows: Vec<Vec<Option<String>>> = if sql == "IDENTIFY_SYSTEM" {
            let timeline = self.pg.timeline.to_string();
            vec![row(&[&self.pg.system_id, &timeline, "0/1000000", "app"])]
        } else if let Some(timeline) = sql.strip_prefix("TIMELINE_HISTORY ") {
            let Some(content) = self.pg.timeline_history.clone() else {
                let error = crate::wire::testing::pg_error(
                    "ERROR",
                    "58P01",
                    &format!(
                        "could not open file \"pg_wal/{:0>8}.history\": No such file or directory",
                        timeline
                    ),
                );
                return vec![
                    BackendMessage::ErrorResponse(Box::new(error)),
                    BackendMessage::ReadyForQuery(TransactionStatus::Idle),
                ];
            };
            vec![row(&[&format!("{timeline:0>8}.history"), &content])]
        } else if sql == "SHOW wal_sender_timeout" {
            vec![row(&[&self.pg.wal_sender_timeout])]
        } else if sql.contains("FROM pg_catalog.pg_publication ORDER BY") {
            // The query puts the one it names first, then the others by name.
            let flag = |on: bool| if on { "t" } else { "f" };
            let (truncate, via_root) = (flag(self.pg.truncate_published), flag(self.pg.via_root));
            let ours = row(&["pub", "f", "t", "t", "t", truncate, via_root]);
            let others = self
                .other_publications
                .iter()
                .map(|name| row(&[name, "f", "t", "t", "t", "t", "f"]));
            self.publication_exists
                .then_some(ours)
                .into_iter()
                .chain(others)
                .collect()
        } else if !self.publication_exists && sql.contains("pg_publication") {
            Vec::new()
        } else if sql.contains("pg_publication_tables") {
            self.published_rows()
        } else if sql.starts_with("WITH RECURSIVE reach") {
            self.types_answer.clone()
        } else if sql.contains("pg_attribute") {
            self.relation_rows(sql)
        } else if sql.contains("pg_last_wal_receive_lsn") {
            vec![self.health_row()]
        } else if sql.contains("FROM pg_catalog.pg_roles r") {
            vec![self.settings.iter().map(|v| Some(v.clone())).collect()]
        } else if sql.contains("has_table_privilege") {
            let granted = if self.select_granted { "t" } else { "f" };
            self.pg
                .tables
                .iter()
                .map(|t| {
                    let mut row = row(&["public", &t.relation.name, granted]);
                    row.push(None);
                    row
                })
                .collect()
        } else if sql.starts_with("SELECT pg_catalog.pg_drop_replication_slot(") {
            self.pg.slot_confirmed = None;
            vec![row(&[""])]
        } else if sql.contains("pg_replication_slots") {
            // Every connection sees what status updates confirmed (a new session's startup
            // too, as on a real server); the control connection of a graceful stop even
            // before the slot is known to exist.
            let other = self.others.contains(&conn);
            let confirmed = if other {
                Some(self.confirmed)
            } else {
                self.pg.slot_confirmed.map(|slot| slot.max(self.confirmed))
            };
            let active_pid = (!other && self.pg.slot_busy_answers > 0)
                .then(|| {
                    self.pg.slot_busy_answers -= 1;
                    "4242".to_owned()
                })
                .or_else(|| self.slot_health.active_pid.map(|p| p.to_string()));
            match confirmed {
                Some(lsn) => vec![vec![
                    Some("slotline_p".into()),
                    Some("pgoutput".into()),
                    Some("logical".into()),
                    Some("app".into()),
                    active_pid,
                    Some(lsn.to_string()),
                    Some(self.slot_health.wal_status.clone()),
                ]],
                None => Vec::new(),
            }
        } else if sql.starts_with("CREATE_REPLICATION_SLOT")
            && sql.contains(" TEMPORARY ")
            && self.pg.temporary_slot_taken > 0
        {
            self.pg.temporary_slot_taken -= 1;
            let name = sql.split_whitespace().nth(1).unwrap_or_default();
            let error = crate::wire::testing::pg_error(
                "ERROR",
                "42710",
                &format!("replication slot {name} already exists"),
            );
            return vec![
                BackendMessage::ErrorResponse(Box::new(error)),
                BackendMessage::ReadyForQuery(TransactionStatus::Idle),
            ];
        } else if sql.starts_with("CREATE_REPLICATION_SLOT") && sql.contains(" TEMPORARY ") {
            // A temporary slot for added routes: the WAL is at 0/3000 by now, and the
            // slot streamed from stays where it is.
            let name = sql.split_whitespace().nth(1).unwrap_or_default().to_owned();
            vec![row(&[&name, "0/3000", "00000003-00000002-2", "pgoutput"])]
        } else if sql.starts_with("CREATE_REPLICATION_SLOT") {
            self.pg.slot_confirmed = Some(Lsn(0x1000));
            self.confirmed = Lsn(0x1000);
            let snapshot = if sql.contains("'export'") {
                "00000003-00000002-1"
            } else {
                ""
            };
            vec![row(&["slotline_p", "0/1000", snapshot, "pgoutput"])]
        } else if sql.starts_with("START_REPLICATION") {
            return vec![BackendMessage::CopyBothResponse(CopyResponse {
                format: 0,
                column_formats: Vec::new(),
            })];
        } else {
            vec![]
        };
        let width = rows.first().map_or(0, Vec::len);
        let mut answer = vec![BackendMessage::RowDescription(RowDescription {
            fields: (0..width)
                .map(|i| crate::wire::backend::FieldDescription {
                    name: format!("c{i}"),
                    table_oid: 0,
                    column_id: 0,
                    type_oid: 25,
                    type_size: -1,
                    type_modifier: -1,
                    format: 0,
                })
                .collect(),
        })];
        let count = rows.len();
        answer.extend(rows.into_iter().map(|r| {
            BackendMessage::DataRow(DataRow {
                columns: r.into_iter().map(|c| c.map(Bytes::from)).collect(),
            })
        }));
        answer.push(BackendMessage::CommandComplete {
            tag: format!("SELECT {count}"),
        });
        answer.push(BackendMessage::ReadyForQuery(TransactionStatus::Idle));
        answer
    }

    /// An online copy's chunk read (one string: its transaction, snapshot, keyset COPY,
    /// committed-but-running xids and COMMIT) and its watermark, whose message the stream
    /// then carries (at once, or when released).
    fn answer_online_copy(&mut self, sql: &str) -> Option<Vec<BackendMessage>> {
        if let Some(args) = sql.strip_prefix("SELECT pg_logical_emit_message(false, 'slotline', '")
        {
            let content = args.split('\'').next().unwrap_or_default().to_owned();
            let at = self.online.next_watermark;
            self.online.next_watermark = Lsn(at.0 + 0x100);
            let answer = single_column(&[at.to_string()], "SELECT 1", TransactionStatus::Idle);
            if self.online.hold {
                self.online.held.push((at, content));
            } else {
                self.send_watermarks(vec![(at, content)]);
            }
            return Some(answer);
        }
        if sql.starts_with("SELECT pg_has_role('pg_read_all_stats'") {
            let sees = if self.online.sees_waits {
                "true"
            } else {
                "false"
            };
            let row = vec![
                Some(Bytes::from(sees)),
                Some(Bytes::from(self.online.synchronous_standby_names.clone())),
            ];
            let mut answer = single_column(&[], "SELECT 1", TransactionStatus::Idle);
            answer.insert(1, BackendMessage::DataRow(DataRow { columns: row }));
            return Some(answer);
        }
        if !sql.starts_with(crate::backfill::keyset::chunk_begin()) {
            return None;
        }
        let copy = sql.split("; COPY (").nth(1)?;
        let table = self
            .pg
            .tables
            .iter()
            .find(|t| copy.contains(&format!("FROM \"public\".\"{}\"", t.relation.name)))?;
        let limit: usize = copy
            .split(" LIMIT ")
            .nth(1)?
            .split(')')
            .next()?
            .parse()
            .ok()?;
        // The fake's tables are keyed by their first column, compared as text.
        let after = copy
            .split(") > ('")
            .nth(1)
            .and_then(|rest| rest.split("')").next())
            .map(|v| v.replace("''", "'"));
        let mut rows: Vec<&Vec<Option<String>>> = table
            .heaps()
            .into_iter()
            .flat_map(|heap| heap.rows.iter())
            .filter(|r| {
                let key = r.first().and_then(|c| c.as_deref()).unwrap_or_default();
                after.as_deref().is_none_or(|after| key > after)
            })
            .collect();
        rows.sort_by(|a, b| a.first().cmp(&b.first()));
        rows.truncate(limit);
        let columns = table.relation.columns.len();
        let mut answer = vec![BackendMessage::CommandComplete {
            tag: "BEGIN".into(),
        }];
        answer.extend(
            single_column(
                std::slice::from_ref(&self.online.snapshot),
                "SELECT 1",
                TransactionStatus::InTransaction,
            )
            .into_iter()
            .filter(|m| !matches!(m, BackendMessage::ReadyForQuery(_))),
        );
        answer.push(BackendMessage::CopyOutResponse(CopyResponse {
            format: 0,
            column_formats: vec![0; columns],
        }));
        for row in &rows {
            let fields: Vec<Option<&[u8]>> = row
                .iter()
                .map(|v| v.as_deref().map(str::as_bytes))
                .collect();
            answer.push(BackendMessage::CopyData(Bytes::from(
                crate::copy::encode_row(&fields),
            )));
        }
        answer.push(BackendMessage::CopyDone);
        answer.push(BackendMessage::CommandComplete {
            tag: format!("COPY {}", rows.len()),
        });
        let committed: Vec<String> = self.online.committed.iter().map(u64::to_string).collect();
        let tag = format!("SELECT {}", committed.len());
        answer.extend(
            single_column(&committed, &tag, TransactionStatus::InTransaction)
                .into_iter()
                .filter(|m| !matches!(m, BackendMessage::ReadyForQuery(_))),
        );
        answer.push(BackendMessage::CommandComplete {
            tag: "COMMIT".into(),
        });
        answer.push(BackendMessage::ReadyForQuery(TransactionStatus::Idle));
        Some(answer)
    }

    /// The stream carries these watermark messages.
    fn send_watermarks(&mut self, marks: Vec<(Lsn, String)>) {
        for (at, content) in marks {
            let message = crate::pgoutput::encode::logical_message(
                false,
                at,
                crate::backfill::chunk::WATERMARK_PREFIX,
                content.as_bytes(),
            );
            self.wal(&format!("watermark {content:?} at {at}"), &[(at, message)]);
        }
    }

    /// Watermarks held back (`FakeOnline::hold`) reach the stream now.
    pub fn release_watermarks(&mut self) {
        let held = std::mem::take(&mut self.online.held);
        self.send_watermarks(held);
    }

    /// Statements a snapshot sends that do not answer with a plain result set: transaction
    /// control, dropping a slot, the table sizes and COPY.
    fn answer_snapshot_query(&mut self, sql: &str) -> Option<Vec<BackendMessage>> {
        let done = |tags: &[&str], status: TransactionStatus| {
            let mut answer: Vec<BackendMessage> = tags
                .iter()
                .map(|t| BackendMessage::CommandComplete { tag: (*t).into() })
                .collect();
            answer.push(BackendMessage::ReadyForQuery(status));
            answer
        };
        if sql.starts_with("BEGIN") {
            let tags: &[&str] = if sql.contains("SET TRANSACTION SNAPSHOT") {
                &["BEGIN", "SET"]
            } else {
                &["BEGIN"]
            };
            return Some(done(tags, TransactionStatus::InTransaction));
        }
        if sql == "COMMIT" {
            return Some(done(&["COMMIT"], TransactionStatus::Idle));
        }
        if sql.starts_with("DROP_REPLICATION_SLOT") {
            if !sql.ends_with("_add") {
                self.pg.slot_confirmed = None;
            }
            return Some(done(&["DROP_REPLICATION_SLOT"], TransactionStatus::Idle));
        }
        if sql.contains("pg_relation_size") {
            let mut tables: Vec<(usize, &FakeTable)> = self
                .pg
                .tables
                .iter()
                .filter_map(|t| {
                    sql.find(&format!("\"public\".\"{}\"'", t.relation.name))
                        .map(|at| (at, t))
                })
                .collect();
            tables.sort_by_key(|(at, _)| *at);
            let mut answer = vec![BackendMessage::RowDescription(RowDescription {
                fields: (0..5)
                    .map(|i| crate::wire::backend::FieldDescription {
                        name: format!("c{i}"),
                        table_oid: 0,
                        column_id: 0,
                        type_oid: 25,
                        type_size: -1,
                        type_modifier: -1,
                        format: 0,
                    })
                    .collect(),
            })];
            let mut count = 0;
            for (route, (_, table)) in tables.iter().enumerate() {
                let mut heaps = table.heaps();
                heaps.sort_by(|a, b| a.relation.name.cmp(&b.relation.name));
                for heap in heaps {
                    let estimate = heap
                        .estimated_rows
                        .map_or("-1".to_owned(), |e| e.to_string());
                    answer.push(BackendMessage::DataRow(DataRow {
                        columns: [
                            route.to_string(),
                            "public".to_owned(),
                            heap.relation.name.clone(),
                            heap.blocks.to_string(),
                            estimate,
                        ]
                        .into_iter()
                        .map(|c| Some(Bytes::from(c)))
                        .collect(),
                    }));
                    count += 1;
                }
            }
            answer.push(BackendMessage::CommandComplete {
                tag: format!("SELECT {count}"),
            });
            answer.push(BackendMessage::ReadyForQuery(
                TransactionStatus::InTransaction,
            ));
            return Some(answer);
        }
        if let Some((head, values)) = sql.split_once(") IN (VALUES ") {
            // A retraction's existence check: which of these keys (first column) exist.
            let table = self.pg.tables.iter().find(|t| {
                head.contains(&format!("FROM \"public\".\"{}\" AS t", t.relation.name))
            })?;
            let asked: Vec<String> = values
                .split("('")
                .skip(1)
                .filter_map(|v| v.split("'::").next())
                .map(|v| v.replace("''", "'"))
                .collect();
            let mut answer = vec![BackendMessage::RowDescription(RowDescription {
                fields: vec![crate::wire::backend::FieldDescription {
                    name: "k".into(),
                    table_oid: 0,
                    column_id: 0,
                    type_oid: 25,
                    type_size: -1,
                    type_modifier: -1,
                    format: 0,
                }],
            })];
            let existing: Vec<&String> = asked
                .iter()
                .filter(|k| {
                    table
                        .heaps()
                        .iter()
                        .flat_map(|heap| &heap.rows)
                        .any(|r| r.first().and_then(|c| c.as_ref()) == Some(*k))
                })
                .collect();
            for key in &existing {
                answer.push(BackendMessage::DataRow(DataRow {
                    columns: vec![Some(Bytes::from((*key).clone()))],
                }));
            }
            answer.push(BackendMessage::CommandComplete {
                tag: format!("SELECT {}", existing.len()),
            });
            answer.push(BackendMessage::ReadyForQuery(
                TransactionStatus::InTransaction,
            ));
            return Some(answer);
        }
        if let Some(rest) = sql.strip_prefix("COPY (") {
            let table = self
                .pg
                .tables
                .iter()
                .flat_map(FakeTable::heaps)
                .find(|t| rest.contains(&format!("FROM \"public\".\"{}\"", t.relation.name)))?;
            let bound = |marker: &str| {
                let at = rest.find(marker)? + marker.len();
                rest[at..].split(',').next()?.parse::<u64>().ok()
            };
            let start = bound("ctid >= '(").unwrap_or(0);
            let end = bound("ctid < '(");
            let mut answer = vec![BackendMessage::CopyOutResponse(CopyResponse {
                format: 0,
                column_formats: vec![0; table.relation.columns.len()],
            })];
            let mut count = 0;
            for row in table.rows_in(start, end) {
                let fields: Vec<Option<&[u8]>> = row
                    .iter()
                    .map(|v| v.as_deref().map(str::as_bytes))
                    .collect();
                answer.push(BackendMessage::CopyData(Bytes::from(
                    crate::copy::encode_row(&fields),
                )));
                count += 1;
            }
            answer.push(BackendMessage::CopyDone);
            answer.push(BackendMessage::CommandComplete {
                tag: format!("COPY {count}"),
            });
            answer.push(BackendMessage::ReadyForQuery(
                TransactionStatus::InTransaction,
            ));
            return Some(answer);
        }
        None
    }

    /// The slot-health row (`catalog::slot::slot_health_query`'s twelve columns).
    fn health_row(&self) -> Vec<Option<String>> {
        let h = &self.slot_health;
        let mut row = vec![Some(h.current_wal.to_string()), Some(h.keep_mb.to_string())];
        match self.pg.slot_confirmed {
            None => row.extend(std::iter::repeat_n(None, 10)),
            Some(_) => {
                let confirmed = self
                    .confirmed
                    .max(self.pg.slot_confirmed.unwrap_or(Lsn::ZERO));
                let safe = (h.keep_mb >= 0).then(|| {
                    let keep = (h.keep_mb as u64) << 20;
                    let retained = h.current_wal.saturating_distance_from(h.restart_lsn);
                    (keep as i64 - retained as i64).to_string()
                });
                let version =
                    crate::wire::server_version::parse_server_version(&self.server_version)
                        .unwrap_or(150_000);
                let since = |v: u32, value: Option<String>| if version >= v { value } else { None };
                row.extend([
                    Some("slotline_p".into()),
                    Some(if h.active_pid.is_some() { "t" } else { "f" }.into()),
                    h.active_pid.map(|p| p.to_string()),
                    Some(confirmed.to_string()),
                    Some(h.restart_lsn.to_string()),
                    Some(h.wal_status.clone()),
                    safe,
                    since(160_000, Some("f".into())),
                    since(170_000, h.invalidation_reason.clone()),
                    since(170_000, Some("f".into())),
                ]);
            }
        }
        // A primary naming no synchronized standby (the setting exists from 17).
        let version = crate::wire::server_version::parse_server_version(&self.server_version)
            .unwrap_or(150_000);
        row.extend([
            (version >= 170_000).then(String::new),
            Some("f".into()),
            Some("off".into()),
        ]);
        row
    }

    /// `catalog::questions::relation_query`'s answer: the table's columns, then each
    /// partition's.
    fn relation_rows(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        let named = |t: &FakeTable| sql.contains(&format!("\"{}\"'::regclass", t.relation.name));
        let mut answer = Vec::new();
        if let Some(table) = self.pg.tables.iter().find(|t| named(t)) {
            answer.extend(column_rows(table, None));
            let mut partitions: Vec<&FakePartition> = table.partitions.iter().collect();
            partitions.sort_by(|a, b| a.table.relation.name.cmp(&b.table.relation.name));
            for p in partitions {
                answer.extend(column_rows(&p.table, Some((p.leaf, p.parent))));
            }
        } else if let Some(p) = self
            .pg
            .tables
            .iter()
            .flat_map(|t| &t.partitions)
            .find(|p| named(&p.table))
        {
            answer.extend(column_rows(&p.table, None));
        }
        answer
    }

    /// `pg_publication_tables` with ancestors: a partitioned table's leaves under
    /// `publish_via_partition_root = false`, else the table.
    fn published_rows(&self) -> Vec<Vec<Option<String>>> {
        let mut rows = Vec::new();
        for table in &self.pg.tables {
            if table.partitions.is_empty() || self.pg.via_root {
                rows.push(vec![
                    Some("public".into()),
                    Some(table.relation.name.clone()),
                    None,
                    None,
                    None,
                    None,
                ]);
                continue;
            }
            for leaf in table.partitions.iter().filter(|p| p.leaf) {
                let mut parent = leaf.parent;
                while let Some(ancestor) = std::iter::once(table)
                    .chain(table.partitions.iter().map(|p| &p.table))
                    .find(|t| t.relation.oid == parent)
                {
                    let mut published = row(&[
                        "public",
                        &leaf.table.relation.name,
                        "public",
                        &ancestor.relation.name,
                    ]);
                    // Every column, every row.
                    published.extend([None, None]);
                    rows.push(published);
                    parent = table
                        .partitions
                        .iter()
                        .find(|p| p.table.relation.oid == parent)
                        .map_or(0, |p| p.parent);
                }
            }
        }
        rows
    }
}

/// The rows `relation_query` answers for one relation: level 0 for the table itself,
/// 1 with `partition` (leaf, parent) for a partition.
fn column_rows(table: &FakeTable, partition: Option<(bool, u32)>) -> Vec<Vec<Option<String>>> {
    let r = &table.relation;
    let secured = if table.row_security { "t" } else { "f" };
    let identity = match r.replica_identity {
        ReplicaIdentity::Default => "d",
        ReplicaIdentity::Nothing => "n",
        ReplicaIdentity::Full => "f",
        ReplicaIdentity::Index => "i",
    };
    r.columns
        .iter()
        .map(|c| {
            let oid = r.oid.to_string();
            let type_oid = c.type_oid.to_string();
            let flag = if c.in_replica_identity { "t" } else { "f" };
            let mut row = row(&[
                &oid, "public", &r.name, identity, &c.name, &type_oid, "-1", flag,
            ]);
            match partition {
                None => row.extend([Some("0".to_owned()), None, None]),
                Some((leaf, parent)) => row.extend([
                    Some("1".to_owned()),
                    Some(if leaf { "t" } else { "f" }.to_owned()),
                    Some(parent.to_string()),
                ]),
            }
            row.push(Some(secured.to_owned()));
            row
        })
        .collect()
}

/// A server ready for slotline: wal_level logical, room for slots and senders, a role
/// with REPLICATION.
pub(super) fn default_settings() -> [String; 8] {
    ["logical", "10", "1", "10", "1", "slotline", "t", "f"].map(str::to_owned)
}

fn row(values: &[&str]) -> Vec<Option<String>> {
    values.iter().map(|v| Some((*v).to_owned())).collect()
}

/// A one-column text result set: its rows, command tag and readiness.
fn single_column(values: &[String], tag: &str, status: TransactionStatus) -> Vec<BackendMessage> {
    let mut answer = vec![BackendMessage::RowDescription(RowDescription {
        fields: vec![crate::wire::backend::FieldDescription {
            name: "c0".into(),
            table_oid: 0,
            column_id: 0,
            type_oid: 25,
            type_size: -1,
            type_modifier: -1,
            format: 0,
        }],
    })];
    answer.extend(values.iter().map(|v| {
        BackendMessage::DataRow(DataRow {
            columns: vec![Some(Bytes::from(v.clone()))],
        })
    }));
    answer.push(BackendMessage::CommandComplete { tag: tag.into() });
    answer.push(BackendMessage::ReadyForQuery(status));
    answer
}

fn summarize_sql(sql: &str) -> String {
    let known = [
        ("pg_relation_size", "<table sizes>"),
        ("pg_publication_tables", "<published tables>"),
        ("pg_catalog.pg_publication ORDER BY", "<publication>"),
        ("WITH RECURSIVE reach", "<column types>"),
        ("pg_attribute", "<table columns>"),
        ("pg_last_wal_receive_lsn", "<slot health>"),
        ("FROM pg_catalog.pg_roles r", "<server settings>"),
        ("has_table_privilege", "<select privileges>"),
        ("pg_replication_slots", "<slot>"),
    ];
    known
        .iter()
        .find(|(needle, _)| sql.contains(needle))
        .map_or_else(|| sql.to_owned(), |(_, short)| (*short).to_owned())
}

#[derive(Debug)]
pub(super) enum FrontendMessage<'a> {
    Startup(String),
    Query(&'a str),
    Status(&'a [u8]),
    CopyDone,
    Terminate,
    Other(u8),
}

/// Splits one frontend message off `bytes` (test input is well-formed: the core wrote it).
fn split_frontend(bytes: &[u8]) -> (FrontendMessage<'_>, &[u8]) {
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
    if bytes[0] == 0 {
        // StartupMessage: length, protocol, then name/value pairs.
        let len = be32(bytes);
        let params: Vec<&str> = std::str::from_utf8(&bytes[8..len])
            .unwrap_or("")
            .split('\0')
            .filter(|s| !s.is_empty())
            .collect();
        let mut shown = String::new();
        for pair in params.chunks(2) {
            if let [name, value] = pair {
                if ["user", "database", "replication"].contains(name) {
                    let _ = write!(shown, "{name}={value} ");
                }
            }
        }
        return (
            FrontendMessage::Startup(shown.trim_end().to_owned()),
            &bytes[len..],
        );
    }
    let tag = bytes[0];
    let len = be32(&bytes[1..]);
    let body = &bytes[5..1 + len];
    let rest = &bytes[1 + len..];
    let message = match tag {
        b'Q' => FrontendMessage::Query(std::str::from_utf8(&body[..body.len() - 1]).unwrap_or("")),
        b'd' => FrontendMessage::Status(body),
        b'c' => FrontendMessage::CopyDone,
        b'X' => FrontendMessage::Terminate,
        other => FrontendMessage::Other(other),
    };
    (message, rest)
}
