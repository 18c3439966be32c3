//! End to end, both shells: what an operator meets on the first day.
//!
//! - The state file's default directory does not depend on the working directory, and a
//!   slot found without its state file in a default directory is refused (the file may be
//!   elsewhere) instead of dropped and copied again.
//! - A first start against a PostgreSQL or a Feldera that does not answer exits 69 at
//!   once, naming `slotline check`, instead of retrying for NO_PROGRESS_TIMEOUT_SECS.

use serde_json::{json, Value};
use slotline_tests::e2e::{Env, Shell};
use std::path::PathBuf;
use std::time::Duration;

const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text);
    INSERT INTO users VALUES (1, 'ada'), (2, 'grace');
    CREATE PUBLICATION pub FOR TABLE users;";

fn schema() -> Value {
    json!({"inputs": [{"name": "users", "case_sensitive": false, "primary_key": ["id"],
        "materialized": false, "properties": {}, "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "name", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": true, "precision": -1}}]}],
        "outputs": []})
}

/// A directory standing in for `XDG_STATE_HOME`, removed on drop.
struct StateHome(PathBuf);

impl StateHome {
    fn new(label: &str) -> StateHome {
        let dir = std::env::temp_dir().join(format!(
            "slotline-xdg-{label}-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        std::fs::create_dir_all(&dir).expect("create XDG_STATE_HOME");
        StateHome(dir)
    }

    fn path(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for StateHome {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

fn ingress_requests(env: &Env) -> usize {
    env.feldera
        .request_counts()
        .get("ingress")
        .copied()
        .unwrap_or(0) as usize
}

/// With STATE_DIR unset, the state file goes to `$XDG_STATE_HOME/slotline`, the log names
/// that absolute directory, and a restart streams on from it.
fn the_default_state_directory_is_absolute_and_found_again(shell: Shell) {
    let env = Env::new("statehome", SETUP, schema());
    let home = StateHome::new("found");
    let extra = [
        ("TABLES", "users"),
        ("SNAPSHOT_MODE", "initial"),
        ("STATE_DIR", ""),
        ("XDG_STATE_HOME", home.0.to_str().unwrap()),
    ];
    let mut first = env.start(shell, &extra);
    let file = home
        .0
        .join("slotline")
        .join(format!("{}.state.json", env.slot_name()));
    let written = slotline_tests::pg::wait_for(Duration::from_secs(60), || {
        std::fs::read_to_string(&file)
            .ok()
            .filter(|text| text.contains("\"complete\""))
    });
    assert!(
        written.is_some(),
        "no complete state file at {}:\n{}",
        file.display(),
        first.log_text()
    );
    assert!(env.wait_caught_up(Duration::from_secs(60)));
    assert_eq!(first.stop(Duration::from_secs(30)), Some(0));
    let log = first.log_text();
    let dir = format!("{}/slotline", home.path());
    assert!(
        log.contains(&format!("state directory {dir} (the default")),
        "the log names the absolute default directory:\n{log}"
    );
    let ingress_before = ingress_requests(&env);
    let mut second = env.start(shell, &extra);
    env.sql("INSERT INTO users VALUES (3, 'edsger')");
    let streamed = slotline_tests::pg::wait_for(Duration::from_secs(60), || {
        (env.feldera_count("users") == 3).then_some(())
    });
    assert!(streamed.is_some(), "{}", second.log_text());
    assert_eq!(second.stop(Duration::from_secs(30)), Some(0));
    let log = second.log_text();
    assert!(
        !log.contains("copying every table again"),
        "the restart found its state file and copied nothing again:\n{log}"
    );
    assert!(
        ingress_requests(&env) > ingress_before,
        "the new row was streamed"
    );
    env.assert_rows_equal("users", "users", "id");
}

#[test]
fn the_default_state_directory_is_absolute_and_found_again_tokio() {
    the_default_state_directory_is_absolute_and_found_again(Shell::Tokio);
}

#[test]
fn the_default_state_directory_is_absolute_and_found_again_blocking() {
    the_default_state_directory_is_absolute_and_found_again(Shell::Blocking);
}

/// A slot exists, STATE_DIR is unset and the default directory has no state file for it
/// (the connector ran elsewhere, or from another directory before the default was
/// absolute): exit 1 naming both ways out, with the slot and Feldera untouched. Setting
/// STATE_DIR explicitly is the operator's decision: the same start then copies again.
fn a_slot_without_its_state_file_in_the_default_directory_is_refused(shell: Shell) {
    let env = Env::new("nostate", SETUP, schema());
    let home = StateHome::new("refused");
    let confirmed = env.create_slot();
    let extra = [
        ("TABLES", "users"),
        ("SNAPSHOT_MODE", "initial"),
        ("STATE_DIR", ""),
        ("XDG_STATE_HOME", home.0.to_str().unwrap()),
    ];
    let mut refused = env.start(shell, &extra);
    let code = refused.wait_exit(Duration::from_secs(60));
    let log = refused.log_text();
    assert_eq!(code, Some(1), "{log}");
    for needle in [
        "exists but its state file",
        "set STATE_DIR",
        "slotline drop-slot --yes",
        &format!("{}/slotline/", home.path()),
    ] {
        assert!(log.contains(needle), "{needle:?} missing:\n{log}");
    }
    assert!(env.slot_exists(), "the slot was kept");
    assert_eq!(env.slot_confirmed().as_deref(), Some(confirmed.as_str()));
    assert_eq!(ingress_requests(&env), 0, "nothing was sent to Feldera");
    let dir = format!("{}/slotline", home.path());
    let mut chosen = env.start(
        shell,
        &[
            ("TABLES", "users"),
            ("SNAPSHOT_MODE", "initial"),
            ("STATE_DIR", &dir),
        ],
    );
    let file = format!("{dir}/{}.state.json", env.slot_name());
    let complete = slotline_tests::pg::wait_for(Duration::from_secs(90), || {
        std::fs::read_to_string(&file)
            .ok()
            .filter(|text| text.contains("\"complete\""))
    });
    assert!(complete.is_some(), "{}", chosen.log_text());
    assert!(env.wait_caught_up(Duration::from_secs(60)));
    assert!(
        chosen.log_text().contains("dropping the slot"),
        "STATE_DIR set: the slot is dropped and the tables copied again:\n{}",
        chosen.log_text()
    );
    assert_eq!(chosen.stop(Duration::from_secs(30)), Some(0));
    env.assert_rows_equal("users", "users", "id");
}

#[test]
fn a_slot_without_its_state_file_in_the_default_directory_is_refused_tokio() {
    a_slot_without_its_state_file_in_the_default_directory_is_refused(Shell::Tokio);
}

#[test]
fn a_slot_without_its_state_file_in_the_default_directory_is_refused_blocking() {
    a_slot_without_its_state_file_in_the_default_directory_is_refused(Shell::Blocking);
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A first start whose PostgreSQL (or Feldera) never answers exits 69 within seconds,
/// naming `slotline check`, though NO_PROGRESS_TIMEOUT_SECS is five minutes; nothing is
/// created.
fn a_first_start_that_reaches_nothing_fails_fast(shell: Shell) {
    let env = Env::new("unreached", SETUP, schema());
    let pg_url = format!("postgres://postgres@127.0.0.1:{}/postgres", closed_port());
    let feldera_url = format!("http://127.0.0.1:{}", closed_port());
    for (what, extra) in [
        ("PostgreSQL", [("PG_URL", pg_url.as_str())]),
        ("Feldera", [("FELDERA_URL", feldera_url.as_str())]),
    ] {
        let mut pairs = vec![("TABLES", "users"), ("NO_PROGRESS_TIMEOUT_SECS", "300")];
        pairs.extend(extra);
        let mut connector = env.start(shell, &pairs);
        let code = connector.wait_exit(Duration::from_secs(60));
        let log = connector.log_text();
        assert_eq!(code, Some(69), "{what}:\n{log}");
        assert!(log.contains("slotline check"), "{what}:\n{log}");
        assert!(log.contains("never reached"), "{what}:\n{log}");
        assert!(!env.slot_exists(), "{what}: no slot was created");
    }
}

#[test]
fn a_first_start_that_reaches_nothing_fails_fast_tokio() {
    a_first_start_that_reaches_nothing_fails_fast(Shell::Tokio);
}

#[test]
fn a_first_start_that_reaches_nothing_fails_fast_blocking() {
    a_first_start_that_reaches_nothing_fails_fast(Shell::Blocking);
}
