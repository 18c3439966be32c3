//! End to end: the command line of both binaries, without PostgreSQL or Feldera.
//!
//! - `--help` (and each command's) groups the options under headings, hides the test-only
//!   options, never renders an unset variable as `[env: NAME=]` and never shows a secret.
//! - A misspelt or unknown environment variable gets one warning line on stderr naming it
//!   and the option it may have been meant as, never its value, before any configuration
//!   error, for every command and whatever `RUST_LOG` says; it does not change the exit.

use slotline_tests::e2e::{operation, Outcome, Shell};

/// The headings of `--help`, in order (`Commands` only at the top level).
const HEADINGS: [&str; 7] = [
    "Options:",
    "PostgreSQL:",
    "Routes (which tables, to which Feldera tables):",
    "Feldera:",
    "Snapshot and state:",
    "Batching and timeouts:",
    "Operations and monitoring:",
];

const SECRETS: [&str; 3] = ["hunter2", "s3cr3t-in-url", "api-k3y"];

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn headings_of(help: &str) -> Vec<&str> {
    help.lines()
        .filter(|line| HEADINGS.contains(line) || *line == "Commands:")
        .collect()
}

fn help_is_grouped_and_hides_what_it_must(shell: Shell) {
    // Secrets set, one variable set, one empty; everything else unset.
    let env = pairs(&[
        ("PG_URL", "postgres://u:s3cr3t-in-url@db.example/app"),
        ("PGPASSWORD", "hunter2"),
        ("FELDERA_API_KEY", "api-k3y"),
        ("PGPORT", "5433"),
        ("PGHOST", ""),
        ("CRASH_AT", "after_ack"),
    ]);
    for args in [
        &["--help"][..],
        &["check", "--help"],
        &["status", "--help"],
        &["ddl", "--help"],
        &["drop-slot", "--help"],
        &["-h"],
    ] {
        let out = operation(shell, &env, args);
        let shown = format!("{} {}:\n{out}", shell.binary_name(), args.join(" "));
        assert_eq!(out.code, Some(0), "{shown}");
        let mut expected: Vec<&str> = HEADINGS.to_vec();
        if args[0] == "--help" || args[0] == "-h" {
            expected.insert(0, "Commands:");
        }
        assert_eq!(headings_of(&out.stdout), expected, "{shown}");
        for hidden in [
            "--crash-at",
            "--crash-after-batches",
            "--seed",
            "CRASH_AT",
            "SLOTLINE_SEED",
        ] {
            assert!(!out.stdout.contains(hidden), "shows {hidden}: {shown}");
        }
        assert!(
            !out.stdout.contains("=]"),
            "an unset or empty value: {shown}"
        );
        assert!(out.stdout.contains("[env: PGHOST]"), "{shown}");
        assert!(out.stdout.contains("[env: PGPORT=5433]"), "{shown}");
        assert!(out.stdout.contains("[env: PG_URL]"), "{shown}");
        assert!(out.stdout.contains("[env: PGPASSWORD]"), "{shown}");
        assert!(out.stdout.contains("[env: FELDERA_API_KEY]"), "{shown}");
        for secret in SECRETS {
            assert!(
                !out.stdout.contains(secret) && !out.stderr.contains(secret),
                "{shown}"
            );
        }
        assert!(!out.stdout.contains("PG_URL is absent"), "{shown}");
    }
}

#[test]
fn help_is_grouped_and_hides_what_it_must_tokio() {
    help_is_grouped_and_hides_what_it_must(Shell::Tokio);
}

#[test]
fn help_is_grouped_and_hides_what_it_must_blocking() {
    help_is_grouped_and_hides_what_it_must(Shell::Blocking);
}

fn warnings_of(out: &Outcome) -> Vec<&str> {
    out.stderr
        .lines()
        .filter(|line| line.contains(": warning: "))
        .collect()
}

fn misspelt_variables_are_named_with_a_suggestion_never_a_value(shell: Shell) {
    let bin = shell.binary_name();
    // Nothing else configured: every command stops at its configuration (exit 2, before any
    // connection), after the warnings.
    let env = pairs(&[
        ("FELDERA_DURABLITY", "checkpoint-hunter2"),
        ("TABELS", "s3cr3t-in-url"),
        ("FELDERA_HOST", "api-k3y"),
        // libpq's own, and unrelated variables: no warning.
        ("PGSSLCRL", "/etc/crl.pem"),
        ("PGAPPNAME", "app"),
        ("PGOPTIONS", "-c x=y"),
        ("HOST", "box"),
        ("RUST_LOG", "off"),
    ]);
    let expected = [
        format!("{bin}: warning: FELDERA_DURABLITY is not an option slotline reads (did you mean FELDERA_DURABILITY?)"),
        format!("{bin}: warning: FELDERA_HOST is not an option slotline reads (--help lists the options)"),
        format!("{bin}: warning: TABELS is not an option slotline reads (did you mean TABLES?)"),
    ];
    for args in [
        &[][..],
        &["check"],
        &["status"],
        &["ddl"],
        &["drop-slot", "--yes"],
    ] {
        let out = operation(shell, &env, args);
        let shown = format!("{bin} {}:\n{out}", args.join(" "));
        assert_eq!(out.code, Some(2), "warnings change no exit code: {shown}");
        assert_eq!(warnings_of(&out), expected, "{shown}");
        let last = out.stderr.lines().last().unwrap_or_default();
        assert!(
            !last.contains("warning") && last.contains("required"),
            "the configuration error comes after the warnings: {shown}"
        );
        for secret in SECRETS {
            assert!(!out.stderr.contains(secret), "a value is shown: {shown}");
        }
        assert!(
            !out.stderr.contains("checkpoint"),
            "a value is shown: {shown}"
        );
    }
    // A correct environment warns about nothing.
    let out = operation(
        shell,
        &pairs(&[("FELDERA_DURABILITY", "checkpoint")]),
        &["check"],
    );
    assert!(warnings_of(&out).is_empty(), "{out}");
}

#[test]
fn misspelt_variables_are_named_with_a_suggestion_never_a_value_tokio() {
    misspelt_variables_are_named_with_a_suggestion_never_a_value(Shell::Tokio);
}

#[test]
fn misspelt_variables_are_named_with_a_suggestion_never_a_value_blocking() {
    misspelt_variables_are_named_with_a_suggestion_never_a_value(Shell::Blocking);
}
