//! Warnings about environment variables that look meant for slotline but are not read by it:
//! an unknown name with one of slotline's prefixes (`FELDERA_HOST`), and a near miss of a
//! known name whatever its prefix (`SNAPHOT_MODE`, `TABELS`, `STATEDIR`). A misspelt
//! variable is otherwise silently ignored and its option keeps its default.
//!
//! Only names are judged and named, never values (a value may be a secret). Warnings never
//! stop the process. Pure: the shell hands in the names (`launch::start`).

/// Prefixes of slotline's own variables: any other name with one is reported.
pub const PREFIXES: [&str; 4] = ["PG_", "FELDERA_", "SNAPSHOT_", "BATCH_"];

/// libpq's environment variables (PostgreSQL 18's libpq documentation, "Environment
/// Variables"), and `PGDATA` of the server's own programs: set for other PostgreSQL
/// clients and tools sharing the environment, so never taken for a misspelt slotline
/// option (`PGSSLCRL` is two edits from `PGSSLCERT`), whether or not slotline reads them.
pub const LIBPQ_VARIABLES: &[&str] = &[
    "PGHOST",
    "PGHOSTADDR",
    "PGPORT",
    "PGDATABASE",
    "PGUSER",
    "PGPASSWORD",
    "PGPASSFILE",
    "PGREQUIREAUTH",
    "PGCHANNELBINDING",
    "PGSERVICE",
    "PGSERVICEFILE",
    "PGOPTIONS",
    "PGAPPNAME",
    "PGSSLMODE",
    "PGREQUIRESSL",
    "PGSSLNEGOTIATION",
    "PGSSLCOMPRESSION",
    "PGSSLCERT",
    "PGSSLKEY",
    "PGSSLCERTMODE",
    "PGSSLROOTCERT",
    "PGSSLCRL",
    "PGSSLCRLDIR",
    "PGSSLSNI",
    "PGREQUIREPEER",
    "PGSSLMINPROTOCOLVERSION",
    "PGSSLMAXPROTOCOLVERSION",
    "PGMINPROTOCOLVERSION",
    "PGMAXPROTOCOLVERSION",
    "PGGSSENCMODE",
    "PGKRBSRVNAME",
    "PGGSSLIB",
    "PGGSSDELEGATION",
    "PGCONNECT_TIMEOUT",
    "PGCLIENTENCODING",
    "PGTARGETSESSIONATTRS",
    "PGLOADBALANCEHOSTS",
    "PGDATESTYLE",
    "PGTZ",
    "PGGEQO",
    "PGSYSCONFDIR",
    "PGLOCALEDIR",
    "PGDATA",
];

/// A variable slotline does not read, and the known one it may have been meant as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    pub name: String,
    pub suggestion: Option<String>,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} is not an option slotline reads", self.name)?;
        match &self.suggestion {
            Some(known) => write!(f, " (did you mean {known}?)"),
            None => write!(f, " (--help lists the options)"),
        }
    }
}

/// How many edits (an insertion, a deletion, a substitution or two neighbours swapped) a
/// name may be from `known` to count as a near miss: 2 for names of 10 characters or more,
/// 1 below, so that common short variables (`USER`, `HOST`) are not taken for `PGUSER` or
/// `PGHOST` misspelt.
fn near_miss_distance(known: &str) -> usize {
    if known.len() >= 10 {
        2
    } else {
        1
    }
}

/// The known name closest to `name` within its near-miss distance (the first of the
/// closest, in `known`'s order). Compared in upper case, so `tables` is taken for `TABLES`.
fn nearest<'k>(name: &str, known: &'k [String]) -> Option<&'k str> {
    let upper = name.to_ascii_uppercase();
    known
        .iter()
        .map(|k| (strsim::osa_distance(&upper, k), k))
        .filter(|(distance, k)| *distance <= near_miss_distance(k))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, k)| k.as_str())
}

/// The warnings for an environment holding the variables `names`, given the `known` names
/// slotline reads: one per name, sorted by name. A known name, and a libpq variable, is
/// never reported.
pub fn warnings<'n>(names: impl IntoIterator<Item = &'n str>, known: &[String]) -> Vec<Warning> {
    let mut names: Vec<&str> = names.into_iter().collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .filter(|name| !known.iter().any(|k| k == name) && !LIBPQ_VARIABLES.contains(name))
        .filter_map(|name| {
            let suggestion = nearest(name, known);
            let prefixed = PREFIXES.iter().any(|prefix| name.starts_with(prefix));
            (prefixed || suggestion.is_some()).then(|| Warning {
                name: name.to_owned(),
                suggestion: suggestion.map(str::to_owned),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> Vec<String> {
        crate::cli::variables_read()
    }

    fn warned(names: &[&str]) -> Vec<String> {
        warnings(names.iter().copied(), &known())
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn near_misses_of_known_names_suggest_the_name_whatever_the_prefix() {
        assert_eq!(
            warned(&["FELDERA_DURABLITY", "SNAPHOT_MODE", "TABELS", "STATEDIR"]),
            [
                "FELDERA_DURABLITY is not an option slotline reads (did you mean FELDERA_DURABILITY?)",
                "SNAPHOT_MODE is not an option slotline reads (did you mean SNAPSHOT_MODE?)",
                "STATEDIR is not an option slotline reads (did you mean STATE_DIR?)",
                "TABELS is not an option slotline reads (did you mean TABLES?)",
            ]
        );
        assert_eq!(
            warned(&["PG_PASSWORD", "PG_HOST", "tables", "SLOTLINE_SEEDS", "FELDERA_DURABILTIY"]),
            [
                "FELDERA_DURABILTIY is not an option slotline reads (did you mean FELDERA_DURABILITY?)",
                "PG_HOST is not an option slotline reads (did you mean PGHOST?)",
                "PG_PASSWORD is not an option slotline reads (did you mean PGPASSWORD?)",
                "SLOTLINE_SEEDS is not an option slotline reads (did you mean SLOTLINE_SEED?)",
                "tables is not an option slotline reads (did you mean TABLES?)",
            ]
        );
    }

    #[test]
    fn unknown_names_with_slotline_prefixes_are_reported_without_a_guess() {
        assert_eq!(
            warned(&[
                "FELDERA_HOST",
                "PG_VERSION",
                "SNAPSHOT_THREADS",
                "BATCH_SIZE"
            ]),
            [
                "BATCH_SIZE is not an option slotline reads (--help lists the options)",
                "FELDERA_HOST is not an option slotline reads (--help lists the options)",
                "PG_VERSION is not an option slotline reads (--help lists the options)",
                "SNAPSHOT_THREADS is not an option slotline reads (--help lists the options)",
            ]
        );
    }

    #[test]
    fn known_names_libpq_variables_and_unrelated_ones_are_left_alone() {
        let mut names: Vec<String> = known();
        names.extend(LIBPQ_VARIABLES.iter().map(|n| (*n).to_owned()));
        names.extend(
            [
                "USER",
                "HOST",
                "HOME",
                "PATH",
                "LOGNAME",
                "SHELL",
                "TERM",
                "PWD",
                "LANG",
                "TZ",
                "RUST_LOG",
                "RUSTUP_LOG",
                "RUST_BACKTRACE",
                "CARGO",
                "HOSTNAME",
                "PAGER",
                "STATE_DIRECTORY",
                "DATA_DIR",
                "LOG_LEVEL",
                "PG",
                "PGX",
            ]
            .map(str::to_owned),
        );
        let found = warnings(names.iter().map(String::as_str), &known());
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn each_name_is_reported_once_and_values_are_never_seen() {
        // Only names go in: a warning cannot carry a value.
        assert_eq!(warned(&["TABELS", "TABELS"]).len(), 1);
        assert!(warned(&[]).is_empty());
    }
}
