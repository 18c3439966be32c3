//! The password file (`.pgpass`, or `PGPASSFILE` / `passfile`): read here, matched by the
//! core (`PgConnConfig::apply_passfile`).
//!
//! As libpq: a missing file is no error, and a file that the group or others may read is
//! ignored with a warning (it should be `chmod 0600`). Never logs what the file holds.

use slotline_core::config::{PassFile, PgConnConfig};
use std::path::PathBuf;

/// Fills in `pg`'s password from its password file, when it has none and the file has a
/// matching line.
pub fn apply(pg: &mut PgConnConfig) {
    let Some(path) = path_of(pg.passfile.as_ref()) else {
        return;
    };
    let shown = path.display();
    let Ok(metadata) = std::fs::metadata(&path) else {
        return;
    };
    if !metadata.is_file() {
        tracing::warn!("password file {shown} is not a plain file; ignored");
        return;
    }
    if let Some(mode) = loose_permissions(&metadata) {
        tracing::warn!(
            "password file {shown} has group or world access (mode {mode:o}); permissions should be u=rw (0600) or less; ignored"
        );
        return;
    }
    match std::fs::read_to_string(&path) {
        Ok(contents) => {
            if pg.apply_passfile(&contents) {
                tracing::debug!("password taken from {shown}");
            }
        }
        Err(error) => tracing::warn!("password file {shown} cannot be read: {error}; ignored"),
    }
}

fn path_of(passfile: Option<&PassFile>) -> Option<PathBuf> {
    match passfile? {
        PassFile::Path(path) => Some(PathBuf::from(path)),
        PassFile::Default => {
            std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".pgpass"))
        }
    }
}

#[cfg(unix)]
fn loose_permissions(metadata: &std::fs::Metadata) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = metadata.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then_some(mode)
}

#[cfg(not(unix))]
fn loose_permissions(_metadata: &std::fs::Metadata) -> Option<u32> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use slotline_core::config::Config;
    use std::os::unix::fs::PermissionsExt;

    fn pg_with_passfile(path: &std::path::Path) -> PgConnConfig {
        let passfile = format!("{}", path.display());
        let url = format!("postgres://slot@db:5432/app?passfile={passfile}");
        let pairs = [
            ("PG_URL", url.as_str()),
            ("PG_PUBLICATION", "p"),
            ("TABLES", "t"),
            ("FELDERA_PIPELINE", "x"),
        ];
        Config::from_pairs(pairs).expect("valid").pg
    }

    fn scratch(name: &str, mode: u32) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("slotline-passfile-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("pgpass");
        std::fs::write(&path, "db:5432:app:slot:from-file\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }

    #[test]
    fn a_private_file_gives_the_password() {
        let path = scratch("private", 0o600);
        let mut pg = pg_with_passfile(&path);
        apply(&mut pg);
        assert_eq!(pg.password.as_ref().map(|p| p.expose()), Some("from-file"));
        let _ = std::fs::remove_dir_all(path.parent().expect("dir"));
    }

    #[test]
    fn a_file_others_may_read_is_ignored() {
        let path = scratch("loose", 0o644);
        let mut pg = pg_with_passfile(&path);
        apply(&mut pg);
        assert_eq!(pg.password, None);
        let _ = std::fs::remove_dir_all(path.parent().expect("dir"));
    }

    #[test]
    fn a_missing_file_is_no_error() {
        let mut pg = pg_with_passfile(std::path::Path::new("/nonexistent/slotline/pgpass"));
        apply(&mut pg);
        assert_eq!(pg.password, None);
    }
}
