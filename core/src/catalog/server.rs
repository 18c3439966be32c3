//! What `slotline check` asks the server beyond what a start asks: the settings logical
//! decoding needs, room for one more slot and WAL sender, the role's privileges and SELECT
//! on every routed table; and the verdict of each, with how to fix it.
//!
//! A start does not need these answers (a missing one fails later with the server's own
//! words: CREATE_REPLICATION_SLOT refuses under `wal_level = replica`); a check gives each
//! its own line so an operator sees every problem at once.

use crate::catalog::questions::{quote_literal, CatalogError, Row};
use crate::catalog::slot::Availability;
use crate::contract::routes::Route;
use crate::report::Line;

/// The server's settings and the role, in one row.
pub const SETTINGS_QUERY: &str = "SELECT current_setting('wal_level'), \
   current_setting('max_replication_slots'), \
   (SELECT count(*) FROM pg_catalog.pg_replication_slots), \
   current_setting('max_wal_senders'), \
   (SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE backend_type = 'walsender'), \
   r.rolname, r.rolreplication, r.rolsuper \
 FROM pg_catalog.pg_roles r WHERE r.rolname = current_user";

/// The answer of `SETTINGS_QUERY`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSettings {
    pub wal_level: String,
    pub max_replication_slots: u64,
    pub slots_used: u64,
    pub max_wal_senders: u64,
    pub wal_senders_used: u64,
    pub role: String,
    pub replication: bool,
    pub superuser: bool,
}

fn bad(problem: impl Into<String>) -> CatalogError {
    CatalogError {
        question: "server settings",
        problem: problem.into(),
    }
}

pub fn parse_settings(rows: &[Row<'_>]) -> Result<ServerSettings, CatalogError> {
    let [row] = rows else {
        return Err(bad(format!("{} rows, expected 1", rows.len())));
    };
    let text = |i: usize| {
        row.get(i)
            .copied()
            .flatten()
            .ok_or_else(|| bad(format!("column {i} is missing or NULL")))
    };
    let number = |i: usize| {
        text(i)?
            .parse::<u64>()
            .map_err(|_| bad(format!("column {i} is not a number")))
    };
    let flag = |i: usize| match text(i)? {
        "t" => Ok(true),
        "f" => Ok(false),
        other => Err(bad(format!("expected t or f, got {other:?}"))),
    };
    Ok(ServerSettings {
        wal_level: text(0)?.to_owned(),
        max_replication_slots: number(1)?,
        slots_used: number(2)?,
        max_wal_senders: number(3)?,
        wal_senders_used: number(4)?,
        role: text(5)?.to_owned(),
        replication: flag(6)?,
        superuser: flag(7)?,
    })
}

/// The fix `check` gives for `wal_level` below logical.
pub const WAL_LEVEL_FIX: &str = "ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL";
/// The fix `check` gives when no replication slot is free.
pub const SLOTS_FIX: &str = "drop slots nobody uses (SELECT slot_name FROM pg_replication_slots WHERE NOT active) or raise max_replication_slots (restart)";
/// The fix `check` gives when no WAL sender is free.
pub const SENDERS_FIX: &str = "raise max_wal_senders (restart) or stop idle replication clients";

/// The fix `check` gives for what a server error says, when it is one of the settings
/// `check` judges (so a start refused by the server says the same as `check` would).
pub fn fix_for_server_error(message: &str) -> Option<&'static str> {
    let message = message.to_ascii_lowercase();
    if message.contains("wal_level") {
        Some(WAL_LEVEL_FIX)
    } else if message.contains("replication slots are in use")
        || message.contains("max_replication_slots")
    {
        Some(SLOTS_FIX)
    } else if message.contains("max_wal_senders") {
        Some(SENDERS_FIX)
    } else {
        None
    }
}

/// The fix `check` gives for a failover slot on a primary that names no standby to wait for.
pub const SYNCHRONIZED_STANDBY_SLOTS_FIX: &str = "on the primary, name the physical slot of each standby that may be promoted: ALTER SYSTEM SET synchronized_standby_slots = '<its slot>'; SELECT pg_reload_conf()";
/// The fix `check` gives for a standby source without `hot_standby_feedback`.
pub const HOT_STANDBY_FEEDBACK_FIX: &str =
    "ALTER SYSTEM SET hot_standby_feedback = on on the standby (and give it a physical slot on the primary); SELECT pg_reload_conf()";

/// What a failover slot and a standby source put at risk (docs/guide/operating.md): a line
/// each, warnings where the setting leaves a hole. `failover`: `PG_SLOT_FAILOVER=true`.
pub fn judge_high_availability(settings: &Availability, failover: bool) -> Vec<Line> {
    let mut lines = Vec::new();
    if settings.in_recovery {
        lines.push(if settings.hot_standby_feedback {
            Line::ok(
                "standby",
                "the source is a standby with hot_standby_feedback on",
            )
        } else {
            Line::warn(
                "standby",
                "the source is a standby with hot_standby_feedback off: the primary may remove catalog rows \
                 logical decoding on the standby still needs, which invalidates slotline's slot (a copy again)",
            )
            .with_fix(HOT_STANDBY_FEEDBACK_FIX)
        });
    }
    if !failover || settings.in_recovery {
        return lines;
    }
    match settings.synchronized_standby_slots.as_deref() {
        // Before 17 a failover slot is refused anyway (`checks::server_version`).
        None => {}
        Some(slots) if slots.trim().is_empty() => lines.push(
            Line::warn(
                "failover",
                "PG_SLOT_FAILOVER=true but synchronized_standby_slots is empty: slotline may acknowledge WAL a \
                 standby has not received, and a standby promoted without it forks the timeline behind what \
                 Feldera holds (rows that exist nowhere in PostgreSQL)",
            )
            .with_fix(SYNCHRONIZED_STANDBY_SLOTS_FIX),
        ),
        Some(slots) => lines.push(Line::ok(
            "failover",
            format!(
                "synchronized_standby_slots = {slots:?}: the failover slot's changes reach slotline only once those \
                 standbys have them"
            ),
        )),
    }
    lines
}

/// The verdicts on the settings. `slot_exists`: the slot is already there (it needs no
/// free entry). The check's own replication connection is one of the WAL senders counted.
pub fn judge_settings(settings: &ServerSettings, slot_exists: bool) -> Vec<Line> {
    let mut lines = Vec::new();
    lines.push(if settings.wal_level == "logical" {
        Line::ok("wal_level", "logical")
    } else {
        Line::fail(
            "wal_level",
            format!(
                "wal_level is {}; logical decoding needs logical",
                settings.wal_level
            ),
            WAL_LEVEL_FIX,
        )
    });
    let free = settings
        .max_replication_slots
        .saturating_sub(settings.slots_used);
    let slots = format!(
        "{} of max_replication_slots {} in use",
        settings.slots_used, settings.max_replication_slots
    );
    lines.push(if slot_exists || free > 0 {
        Line::ok("replication slots", slots)
    } else {
        Line::fail(
            "replication slots",
            format!("{slots}: no room for slotline's slot"),
            SLOTS_FIX,
        )
    });
    let senders = format!(
        "{} of max_wal_senders {} in use (this check's connection included)",
        settings.wal_senders_used, settings.max_wal_senders
    );
    lines.push(
        if settings.wal_senders_used <= settings.max_wal_senders && settings.max_wal_senders > 0 {
            Line::ok("wal senders", senders)
        } else {
            Line::fail("wal senders", senders, SENDERS_FIX)
        },
    );
    lines.push(if settings.replication || settings.superuser {
        let how = if settings.superuser {
            "superuser"
        } else {
            "REPLICATION"
        };
        Line::ok("role", format!("{} has {how}", settings.role))
    } else {
        Line::fail(
            "role",
            format!("role {} lacks the REPLICATION attribute", settings.role),
            format!("ALTER ROLE {} REPLICATION", settings.role),
        )
    });
    lines
}

/// Whether the role may SELECT each routed table (that exists), and which leaf partitions
/// of it it may not SELECT (NULL: none): a copy reads a partitioned table through its
/// leaves, and a partition's privileges are its own.
pub fn select_privileges_query(routes: &[Route]) -> Option<String> {
    let pairs = routes
        .iter()
        .map(|r| {
            Some(format!(
                "({}, {})",
                quote_literal(&r.source.schema)?,
                quote_literal(&r.source.name)?
            ))
        })
        .collect::<Option<Vec<_>>>()?;
    if pairs.is_empty() {
        return None;
    }
    Some(format!(
        "SELECT n.nspname, c.relname, pg_catalog.has_table_privilege(c.oid, 'SELECT'), \
           (SELECT pg_catalog.string_agg(pg_catalog.format('%I.%I', ln.nspname, lc.relname), ', ' \
              ORDER BY ln.nspname, lc.relname) \
            FROM pg_catalog.pg_partition_tree(c.oid) t \
            JOIN pg_catalog.pg_class lc ON lc.oid = t.relid \
            JOIN pg_catalog.pg_namespace ln ON ln.oid = lc.relnamespace \
            WHERE t.level > 0 AND t.isleaf AND NOT pg_catalog.has_table_privilege(t.relid, 'SELECT')) \
         FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
         WHERE (n.nspname, c.relname) IN ({}) ORDER BY 1, 2",
        pairs.join(", ")
    ))
}

/// The verdict per table: SELECT is needed to copy (a snapshot) and to check which keys
/// still exist when retracting leftovers; stream-only needs it for neither.
pub fn judge_select(rows: &[Row<'_>], routes: &[Route], role: &str, needed: bool) -> Vec<Line> {
    let mut lines = Vec::new();
    for route in routes {
        let granted = rows.iter().find_map(|row| match row {
            [Some(schema), Some(table), Some(flag), denied] if route.source.is(schema, table) => {
                Some((*flag == "t", *denied))
            }
            _ => None,
        });
        let item = format!("select {}", route.source);
        let (refused, grant) = match granted {
            // A table that does not exist has its own line (the table check).
            None => continue,
            Some((true, None)) => {
                lines.push(Line::ok(item, format!("{role} may SELECT it")));
                continue;
            }
            Some((true, Some(partitions))) => (
                format!(
                    "{role} may SELECT {} but not its partition(s) {partitions}, and the initial copy reads a partitioned table through its partitions",
                    route.source
                ),
                partitions.to_owned(),
            ),
            Some((false, _)) => (
                format!("{role} may not SELECT {}: the initial copy reads it", route.source),
                route.source.to_string(),
            ),
        };
        lines.push(if needed {
            Line::fail(item, refused, format!("GRANT SELECT ON {grant} TO {role}"))
        } else {
            Line::warn(
                item,
                format!("{refused}; fine for SNAPSHOT_MODE=never, but a snapshot needs it"),
            )
        });
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::routes::parse_tables;
    use crate::report::Verdict;

    #[test]
    fn server_errors_about_settings_check_judges_get_check_s_fix() {
        // The wal_level refusal as 15 and 16+ word it (e2e_ops sees it on 15-18), the slots
        // one as measured on 15; the WAL sender one is matched by the setting it names.
        let cases = [
            ("ERROR:  logical decoding requires \"wal_level\" >= \"logical\"", Some(WAL_LEVEL_FIX)),
            ("ERROR:  logical decoding requires wal_level >= logical", Some(WAL_LEVEL_FIX)),
            ("ERROR:  all replication slots are in use", Some(SLOTS_FIX)),
            ("FATAL:  number of requested standby connections exceeds \"max_wal_senders\" (currently 1)", Some(SENDERS_FIX)),
            ("ERROR:  replication slot \"s\" already exists", None),
        ];
        for (message, fix) in cases {
            assert_eq!(fix_for_server_error(message), fix, "{message}");
        }
    }

    fn settings() -> ServerSettings {
        ServerSettings {
            wal_level: "logical".into(),
            max_replication_slots: 10,
            slots_used: 3,
            max_wal_senders: 10,
            wal_senders_used: 1,
            role: "slotline".into(),
            replication: true,
            superuser: false,
        }
    }

    fn primary() -> Availability {
        Availability {
            synchronized_standby_slots: Some(String::new()),
            in_recovery: false,
            hot_standby_feedback: false,
        }
    }

    fn verdicts(lines: &[Line]) -> Vec<(&str, Verdict)> {
        lines.iter().map(|l| (l.item.as_str(), l.verdict)).collect()
    }

    #[test]
    fn a_ready_server_is_all_green() {
        let lines = judge_settings(&settings(), false);
        assert!(lines.iter().all(|l| l.verdict == Verdict::Ok), "{lines:?}");
    }

    #[test]
    fn each_missing_setting_is_its_own_problem_with_a_fix() {
        let broken = ServerSettings {
            wal_level: "replica".into(),
            slots_used: 10,
            replication: false,
            ..settings()
        };
        let lines = judge_settings(&broken, false);
        assert_eq!(
            verdicts(&lines),
            [
                ("wal_level", Verdict::Fail),
                ("replication slots", Verdict::Fail),
                ("wal senders", Verdict::Ok),
                ("role", Verdict::Fail)
            ]
        );
        assert!(lines
            .iter()
            .all(|l| l.verdict != Verdict::Fail || l.fix.is_some()));
        assert_eq!(
            lines[0].message,
            "wal_level is replica; logical decoding needs logical"
        );
        // An existing slot needs no free entry.
        assert_eq!(judge_settings(&broken, true)[1].verdict, Verdict::Ok);
    }

    #[test]
    fn a_failover_slot_without_a_synchronized_standby_and_a_standby_without_feedback_are_warned() {
        let lines = judge_high_availability(&primary(), true);
        assert_eq!(verdicts(&lines), [("failover", Verdict::Warn)]);
        assert!(lines[0]
            .message
            .contains("synchronized_standby_slots is empty"));
        assert_eq!(
            lines[0].fix.as_deref(),
            Some(SYNCHRONIZED_STANDBY_SLOTS_FIX)
        );
        assert!(
            judge_high_availability(&primary(), false).is_empty(),
            "no failover slot, nothing to say"
        );
        let named = Availability {
            synchronized_standby_slots: Some("standby1".into()),
            ..primary()
        };
        assert_eq!(
            verdicts(&judge_high_availability(&named, true)),
            [("failover", Verdict::Ok)]
        );
        let standby = Availability {
            in_recovery: true,
            ..primary()
        };
        let lines = judge_high_availability(&standby, true);
        assert_eq!(verdicts(&lines), [("standby", Verdict::Warn)]);
        assert_eq!(lines[0].fix.as_deref(), Some(HOT_STANDBY_FEEDBACK_FIX));
        let fed = Availability {
            hot_standby_feedback: true,
            ..standby
        };
        assert_eq!(
            verdicts(&judge_high_availability(&fed, false)),
            [("standby", Verdict::Ok)]
        );
    }

    #[test]
    fn settings_answers_parse_strictly() {
        let row: [Option<&str>; 8] = [
            Some("logical"),
            Some("10"),
            Some("2"),
            Some("10"),
            Some("1"),
            Some("slotline"),
            Some("t"),
            Some("f"),
        ];
        assert_eq!(parse_settings(&[&row]).unwrap().slots_used, 2);
        let mut broken = row;
        broken[6] = Some("maybe");
        assert!(parse_settings(&[&broken]).is_err());
        assert!(parse_settings(&[]).is_err());
    }

    #[test]
    fn select_is_a_problem_only_when_a_snapshot_needs_it() {
        let routes = parse_tables("users,public.items").unwrap();
        let query = select_privileges_query(&routes).unwrap();
        assert!(
            query.contains("('public', 'users'), ('public', 'items')"),
            "{query}"
        );
        let rows: [[Option<&str>; 4]; 2] = [
            [Some("public"), Some("items"), Some("t"), None],
            [Some("public"), Some("users"), Some("f"), None],
        ];
        let rows: Vec<Row<'_>> = rows.iter().map(|r| &r[..]).collect();
        let lines = judge_select(&rows, &routes, "slotline", true);
        assert_eq!(
            verdicts(&lines),
            [
                ("select public.users", Verdict::Fail),
                ("select public.items", Verdict::Ok)
            ]
        );
        assert_eq!(
            lines[0].fix.as_deref(),
            Some("GRANT SELECT ON public.users TO slotline")
        );
        let lines = judge_select(&rows, &routes, "slotline", false);
        assert_eq!(lines[0].verdict, Verdict::Warn);
    }

    #[test]
    fn select_on_a_partitioned_table_needs_select_on_its_partitions_too() {
        let routes = parse_tables("metrics").unwrap();
        let rows = [[
            Some("public"),
            Some("metrics"),
            Some("t"),
            Some("public.metrics_2024, public.metrics_rest"),
        ]];
        let rows: Vec<Row<'_>> = rows.iter().map(|r| &r[..]).collect();
        let lines = judge_select(&rows, &routes, "slotline", true);
        assert_eq!(verdicts(&lines), [("select public.metrics", Verdict::Fail)]);
        assert!(
            lines[0]
                .message
                .contains("but not its partition(s) public.metrics_2024, public.metrics_rest"),
            "{}",
            lines[0].message
        );
        assert_eq!(
            lines[0].fix.as_deref(),
            Some("GRANT SELECT ON public.metrics_2024, public.metrics_rest TO slotline")
        );
    }
}
