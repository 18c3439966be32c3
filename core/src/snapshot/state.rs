//! The state file `<STATE_DIR>/<slot>.state.json`: the record that a copy of every routed
//! table was started (`pending`) or finished (`complete`) under one slot, on one PostgreSQL
//! cluster and database, for one Feldera pipeline; and, per route, a copy made apart from
//! the others (a route added since, or one removed: `RoutePhase`).
//!
//! Owns the file's format: encoding (pretty JSON, fixed key order, trailing newline, what
//! operators read) and strict parsing. Every malformed file is a `StateError` saying what is
//! wrong and what is accepted; nothing here decides what a start does with it (that is
//! `plan`), and nothing here touches the file system: the shell reads and writes the bytes.

use crate::time::PgTime;
use crate::Lsn;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The format version this slotline writes and the only one it reads.
pub const FORMAT_VERSION: u32 = 1;

/// What a state file holds, for error messages.
const FIELDS: &str = "version, system_id, database, slot, publication, pipeline, \
routes [{source, target, and optionally phase (pending, complete or removed), consistent_point, published (text), \
leaves [{oid (number), schema, name (text)}], oid (number) and copied_through (a list of text)}], phase (pending or complete), consistent_point (an LSN like 16/B374D848, or null), \
updated_at (text, or null), and optionally feldera_incarnation (text), feldera_written_under \
{pipeline_id (text), fault_tolerance (text), initial_start_time (seconds)} and delivered {timeline (number), \
through (an LSN)}";

/// Whether the copy recorded by a state file finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SnapshotPhase {
    /// A copy was started and has not been recorded as finished: the target may hold part
    /// of it.
    Pending,
    /// Every routed table was copied and every copied batch is durable in Feldera.
    Complete,
}

impl fmt::Display for SnapshotPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SnapshotPhase::Pending => "pending",
            SnapshotPhase::Complete => "complete",
        })
    }
}

/// Where a route copied apart from the others stands (docs/snapshot.md, "Adding and
/// removing tables"). A route without one is covered by the file's own `phase` and
/// `consistent_point`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoutePhase {
    /// Added to a running deployment; its own copy was started and is not recorded as
    /// finished: Feldera's table may hold part of it.
    Pending,
    /// Its own copy is durable in Feldera as of the route's `consistent_point`: the stream
    /// skips the table's transactions that committed before it.
    Complete,
    /// No longer routed. Its Feldera table keeps what it held (stale from then on); changes
    /// of it the slot still carries (committed before it left the publication) are skipped.
    Removed,
}

impl fmt::Display for RoutePhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RoutePhase::Pending => "pending",
            RoutePhase::Complete => "complete",
            RoutePhase::Removed => "removed",
        })
    }
}

/// One route as a state file records it. Printed as `TABLES` spells it: `source:target`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateRoute {
    /// The schema-qualified PostgreSQL table, printed as `PgTable` prints it
    /// (`public.users`, `"Sales"."Items"`).
    pub source: String,
    /// The Feldera table, printed as `Name` prints it (`users`, `"Users"`).
    pub target: String,
    /// The route's own copy, when it was added (or removed) after the file's copy; absent
    /// for a route the file's `phase` covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<RoutePhase>,
    /// With `phase` `complete`: the consistent point of the temporary slot whose snapshot
    /// the route's own copy read.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "lsn_text")]
    pub consistent_point: Option<Lsn>,
    /// What the publication published of the table when it was copied (its row filter and
    /// the columns its column list left out, `catalog::published::fingerprint`): a start
    /// that finds it changed copies the table again. Absent in files written before it was
    /// recorded, which no change is read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<String>,
    /// Every leaf partition the catalog has shown of the table, by OID, in OID order:
    /// changes still in the slot of a leaf since detached or dropped arrive under its OID,
    /// which only this record places (docs/snapshot.md, "The state file"). Absent for a
    /// table without partitions and in files written before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leaves: Vec<StateLeaf>,
    /// The table's OID when the catalog last showed it routed: once the route is removed,
    /// only changes of that OID are the removed route's to skip (a table created later
    /// under the same name is another table). Absent in files written before it was
    /// recorded, whose removed routes are matched by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oid: Option<u32>,
    /// With `phase` `pending`, a route being copied online (docs/online-copy.md): the key
    /// (each column's value as COPY's text prints it, in key order) of the last row of the
    /// last chunk Feldera holds durably; a restart goes on after it. Absent before the first
    /// chunk is durable and for every other route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copied_through: Option<Vec<String>>,
}

/// A leaf partition of a routed table, as a state file records it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateLeaf {
    /// Its OID, which pgoutput's Relation message carries.
    pub oid: u32,
    /// Its schema and name when the catalog last showed it, for messages.
    pub schema: String,
    pub name: String,
}

impl StateRoute {
    /// The record of a configured route, covered by the file's own phase.
    pub fn of(route: &crate::contract::routes::Route) -> StateRoute {
        StateRoute {
            source: route.source.to_string(),
            target: route.destination.to_string(),
            phase: None,
            consistent_point: None,
            published: None,
            leaves: Vec::new(),
            oid: None,
            copied_through: None,
        }
    }

    /// Only the route: its source and target.
    pub fn bare(&self) -> StateRoute {
        StateRoute {
            phase: None,
            consistent_point: None,
            published: None,
            leaves: Vec::new(),
            oid: None,
            copied_through: None,
            ..self.clone()
        }
    }

    /// Records `oid`, the table's OID as the catalog shows it now; whether it changed.
    pub fn learn_oid(&mut self, oid: u32) -> bool {
        let changed = self.oid != Some(oid);
        self.oid = Some(oid);
        changed
    }

    /// Records the leaves `seen` (the catalog's, now): a leaf not recorded yet is added, a
    /// recorded one takes the name it has now; none is forgotten. Whether anything changed.
    pub fn learn_leaves(&mut self, seen: &[StateLeaf]) -> bool {
        let before = self.leaves.clone();
        for leaf in seen {
            match self.leaves.iter_mut().find(|l| l.oid == leaf.oid) {
                Some(known) => known.clone_from(leaf),
                None => self.leaves.push(leaf.clone()),
            }
        }
        self.leaves.sort();
        self.leaves != before
    }

    /// This route, recording what the publication publishes of it now.
    pub fn with_published(mut self, published: Option<String>) -> StateRoute {
        self.published = published;
        self
    }

    /// Whether the publication publishes another set of rows or columns of the table than
    /// it did when `self` (the record) was copied; never for a record that does not say.
    pub fn publication_changed(&self, now: &StateRoute) -> bool {
        matches!((&self.published, &now.published), (Some(then), Some(now)) if then != now)
    }

    /// The same source and target, whatever either record says of its copy.
    pub fn same_route(&self, other: &StateRoute) -> bool {
        self.source == other.source && self.target == other.target
    }

    /// This route with its own phase (and consistent point).
    pub fn with_phase(&self, phase: Option<RoutePhase>, point: Option<Lsn>) -> StateRoute {
        StateRoute {
            phase,
            consistent_point: point,
            // An online copy's progress belongs to its pending copy only.
            copied_through: self
                .copied_through
                .clone()
                .filter(|_| phase == Some(RoutePhase::Pending)),
            ..self.clone()
        }
    }

    /// Routed now (not `removed`).
    pub fn is_routed(&self) -> bool {
        self.phase != Some(RoutePhase::Removed)
    }

    /// Copied: by the file's copy (when it is complete), or by its own.
    pub fn is_copied(&self, file_phase: SnapshotPhase) -> bool {
        match self.phase {
            None => file_phase == SnapshotPhase::Complete,
            Some(phase) => phase == RoutePhase::Complete,
        }
    }
}

impl fmt::Display for StateRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.source, self.target)
    }
}

/// The contents of a state file.
///
/// Every key is always written and must be present when read (`consistent_point` and
/// `updated_at` may be null). A `Complete` file always carries its slot's consistent point:
/// the copy is only complete relative to a point the stream continues from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateFile {
    /// Always `FORMAT_VERSION` when written; parsing refuses every other value.
    pub version: u32,
    /// The PostgreSQL cluster's system identifier (`IDENTIFY_SYSTEM`), as text: it is a
    /// 64-bit number, beyond what JSON readers hold exactly as a number.
    pub system_id: String,
    pub database: String,
    pub slot: String,
    pub publication: String,
    pub pipeline: String,
    pub routes: Vec<StateRoute>,
    pub phase: SnapshotPhase,
    /// The slot's consistent point: the copy holds every commit up to it, the stream every
    /// commit after it.
    #[serde(with = "lsn_text")]
    pub consistent_point: Option<Lsn>,
    /// When the file was written, as `rfc3339_utc` renders it. Informational only.
    #[serde(deserialize_with = "present")]
    pub updated_at: Option<String>,
    /// The Feldera pipeline's incarnation (`global_metrics.incarnation_uuid`) the copy was
    /// written to. Without fault tolerance, another incarnation means the tables the copy
    /// seeded are gone. Absent in files written before slotline recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feldera_incarnation: Option<String>,
    /// What the pipeline was when the copy was written to it: what a later start compares
    /// with before it trusts that a restarted pipeline still holds the copy. Absent in files
    /// written before slotline recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feldera_written_under: Option<WrittenUnder>,
    /// How far in the WAL what Feldera holds may reach, and on which timeline it was read
    /// (docs/snapshot.md, "A timeline that forked"). Absent in files written before
    /// slotline recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered: Option<Delivered>,
}

/// A bound on the WAL Feldera may hold changes of: every row slotline sent (a copy's rows,
/// streamed changes, a TRUNCATE's retraction) was read at or before `through`, from WAL of
/// `timeline`. Written before anything past it is sent, so it may overstate, never
/// understate, what was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delivered {
    pub timeline: u32,
    #[serde(with = "lsn_one")]
    pub through: Lsn,
}

/// A required LSN, written as PostgreSQL prints it.
mod lsn_one {
    use crate::Lsn;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(lsn: &Lsn, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(lsn)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Lsn, D::Error> {
        String::deserialize(d)?.parse().map_err(D::Error::custom)
    }
}

/// The Feldera pipeline a copy was written to (docs/snapshot.md, "A restarted pipeline").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WrittenUnder {
    /// The pipeline's `id`: a pipeline deleted and created again under its name has
    /// another one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_id: Option<String>,
    /// Its fault-tolerance model then (`none`, `at_least_once`, `exactly_once`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_tolerance: Option<String>,
    /// `global_metrics.initial_start_time` of the process written to: a later process that
    /// resumed from the checkpoints holding the copy reports the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_start_time: Option<u64>,
}

/// Refuses a missing key even for an `Option` (serde would otherwise read it as null).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    T::deserialize(d)
}

/// LSNs are written as PostgreSQL prints them (`16/B374D848`), not as numbers.
mod lsn_text {
    use crate::Lsn;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(lsn: &Option<Lsn>, s: S) -> Result<S::Ok, S::Error> {
        match lsn {
            Some(lsn) => s.collect_str(lsn),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Lsn>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| text.parse().map_err(D::Error::custom))
            .transpose()
    }
}

/// Why a state file cannot be used. Each message reads after "cannot use state file
/// <path>: " and says what is wrong and what is accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateError {
    /// The file exists but reading it failed (the shell's own words).
    Read(String),
    /// Zero bytes, or only whitespace.
    Empty,
    /// Not UTF-8: the first invalid byte's offset.
    NotUtf8 { offset: usize },
    /// The JSON stops before its end.
    Truncated { line: usize, column: usize },
    /// Not JSON.
    Syntax {
        line: usize,
        column: usize,
        problem: String,
    },
    /// JSON, but not an object (the JSON type found).
    NotAnObject { found: &'static str },
    /// A `version` other than `FORMAT_VERSION`, as JSON text (`None`: no `version` key).
    Version { found: Option<String> },
    /// A field is missing, unknown or of the wrong type (`path` is where, `.` the top).
    Field { path: String, problem: String },
    /// A complete copy without its consistent point.
    CompleteWithoutConsistentPoint,
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = FORMAT_VERSION;
        match self {
            StateError::Read(error) => write!(f, "reading it failed: {error}"),
            StateError::Empty => write!(
                f,
                "the file is empty; a state file is one JSON object of format version {v}"
            ),
            StateError::NotUtf8 { offset } => write!(
                f,
                "byte {offset} is not UTF-8; a state file is JSON text of format version {v}"
            ),
            StateError::Truncated { line, column } => write!(
                f,
                "the JSON stops at line {line}, column {column} before it is complete (cut short?); \
                 a state file is one whole JSON object of format version {v}"
            ),
            StateError::Syntax {
                line,
                column,
                problem,
            } => write!(
                f,
                "not valid JSON at line {line}, column {column}: {problem}; \
                 a state file is one JSON object of format version {v}"
            ),
            StateError::NotAnObject { found } => write!(
                f,
                "the JSON is {found}, not an object; a state file is one JSON object of format version {v}"
            ),
            StateError::Version { found: Some(found) } => write!(
                f,
                "format version {found} is not one this slotline reads ({v})"
            ),
            StateError::Version { found: None } => write!(
                f,
                "the object has no \"version\"; this slotline reads format version {v}"
            ),
            StateError::Field { path, problem } => {
                if path != "." {
                    write!(f, "at {path}: ")?;
                }
                write!(f, "{problem}; a state file holds {FIELDS}")
            }
            StateError::CompleteWithoutConsistentPoint => f.write_str(
                "phase is complete but consistent_point is null; a complete copy always records \
                 the slot's consistent point (an LSN like 16/B374D848)",
            ),
        }
    }
}

impl std::error::Error for StateError {}

impl StateFile {
    /// The file's bytes: pretty JSON, keys in declaration order, a trailing newline.
    pub fn encode(&self) -> Vec<u8> {
        debug_assert!(
            self.phase == SnapshotPhase::Pending || self.consistent_point.is_some(),
            "a complete state carries its consistent point"
        );
        let mut bytes = serde_json::to_vec_pretty(self).expect(
            "a StateFile holds only strings, numbers, enums and LSN text: it always serialises",
        );
        bytes.push(b'\n');
        bytes
    }

    /// The routes with a phase of their own, as `status` and `check` print them
    /// (`public.items:items complete at 0/3000, public.gone:gone removed`); `None` when
    /// every route is covered by the file's own copy.
    pub fn own_phases(&self) -> Option<String> {
        let own: Vec<String> = self
            .routes
            .iter()
            .filter_map(|route| {
                let phase = route.phase?;
                Some(match (route.consistent_point, &route.copied_through) {
                    (Some(point), _) => format!("{route} {phase} at {point}"),
                    (None, Some(key)) if key.is_empty() => {
                        format!("{route} {phase} (copying online, no chunk durable yet)")
                    }
                    (None, Some(key)) => format!(
                        "{route} {phase} (copying online, durable through key ({}))",
                        key.join(", ")
                    ),
                    (None, None) => format!("{route} {phase}"),
                })
            })
            .collect();
        (!own.is_empty()).then(|| own.join(", "))
    }

    /// Parses a state file, refusing anything this slotline did not write.
    pub fn parse(bytes: &[u8]) -> Result<StateFile, StateError> {
        let text = std::str::from_utf8(bytes).map_err(|e| StateError::NotUtf8 {
            offset: e.valid_up_to(),
        })?;
        if text.trim().is_empty() {
            return Err(StateError::Empty);
        }
        // The version is read first, on its own: a newer format is named as such, not as a
        // list of unknown fields.
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| syntax(&e))?;
        let object = value.as_object().ok_or(StateError::NotAnObject {
            found: json_type(&value),
        })?;
        match object.get("version") {
            None => return Err(StateError::Version { found: None }),
            Some(version) if version.as_u64() != Some(u64::from(FORMAT_VERSION)) => {
                return Err(StateError::Version {
                    found: Some(version.to_string()),
                })
            }
            Some(_) => {}
        }
        // Parsed again from the text, not the value: a duplicated key is refused there.
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let state: StateFile =
            serde_path_to_error::deserialize(&mut deserializer).map_err(|e| field_error(&e))?;
        if state.phase == SnapshotPhase::Complete && state.consistent_point.is_none() {
            return Err(StateError::CompleteWithoutConsistentPoint);
        }
        for (index, route) in state.routes.iter().enumerate() {
            let problem = match (route.phase, route.consistent_point) {
                (Some(RoutePhase::Complete), None) => {
                    "phase is complete but there is no consistent_point; a route's own complete copy records its consistent point"
                }
                (None, Some(_)) => "a consistent_point without a phase",
                (Some(RoutePhase::Pending | RoutePhase::Removed), Some(_)) => {
                    "a consistent_point belongs only to phase complete"
                }
                _ => continue,
            };
            return Err(StateError::Field {
                path: format!("routes[{index}]"),
                problem: problem.to_owned(),
            });
        }
        Ok(state)
    }
}

fn field_error(error: &serde_path_to_error::Error<serde_json::Error>) -> StateError {
    let problem = problem_only(error.inner());
    let mut path = error.path().to_string();
    // The path of an unknown field ends with that field, which the problem names already:
    // say where it was found instead.
    if problem.starts_with("unknown field") {
        path = match path.rfind('.') {
            Some(dot) => path[..dot].to_owned(),
            None => ".".to_owned(),
        };
    }
    StateError::Field { path, problem }
}

fn syntax(error: &serde_json::Error) -> StateError {
    let (line, column) = (error.line(), error.column());
    match error.classify() {
        serde_json::error::Category::Eof => StateError::Truncated { line, column },
        _ => StateError::Syntax {
            line,
            column,
            problem: problem_only(error),
        },
    }
}

/// serde_json's message without its own " at line L column C" suffix (the error says where).
fn problem_only(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rfind(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

fn json_type(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// A slot name that cannot be part of a state file's path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotNameError {
    pub slot: String,
}

impl fmt::Display for SlotNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "slot name {:?} cannot name a state file: accepted are 1 to 63 characters from letters, digits and _",
            self.slot
        )
    }
}

impl std::error::Error for SlotNameError {}

/// `<state_dir>/<slot>.state.json`. A slot name is a PostgreSQL identifier (letters,
/// digits, `_`); anything else, a path separator or `..` above all, is refused rather than
/// allowed to point the file elsewhere.
pub fn state_path(state_dir: &str, slot: &str) -> Result<String, SlotNameError> {
    let valid = !slot.is_empty()
        && slot.len() <= 63
        && slot.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !valid {
        return Err(SlotNameError {
            slot: slot.to_owned(),
        });
    }
    let dir = match state_dir.trim_end_matches('/') {
        "" if state_dir.starts_with('/') => "",
        "" => ".",
        dir => dir,
    };
    Ok(format!("{dir}/{slot}.state.json"))
}

/// `2024-02-29T12:34:56Z`: the wall clock the core was given, as `updated_at` records it
/// (whole seconds, UTC).
pub fn rfc3339_utc(wall: PgTime) -> String {
    let unix_secs = wall.0.div_euclid(1_000_000) + PgTime::UNIX_EPOCH_OFFSET_SECS;
    let (days, secs_of_day) = (unix_secs.div_euclid(86_400), unix_secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs_of_day / 3600,
        secs_of_day / 60 % 60,
        secs_of_day % 60
    )
}

/// The proleptic Gregorian date of a day count from 1970-01-01, computed in 400-year eras
/// (146,097 days each) counted from 0000-03-01 so that the leap day ends each year.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let shifted = days + 719_468; // days from 0000-03-01 to 1970-01-01
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
