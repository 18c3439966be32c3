use super::*;
use slotline_core::config::is_secret;

/// The help text of each option: from its flag's line to the next option's.
fn help_blocks(help: &str) -> Vec<String> {
    let mut blocks: Vec<String> = Vec::new();
    for line in help.lines() {
        let indent = line.len() - line.trim_start().len();
        let is_option_line = indent > 0 && indent < 8 && line.trim_start().starts_with('-');
        match blocks.last_mut() {
            Some(block) if !is_option_line => {
                block.push('\n');
                block.push_str(line);
            }
            _ if is_option_line => blocks.push(line.to_owned()),
            _ => {}
        }
    }
    blocks
}

fn help_block(help: &str, variable: &str) -> String {
    // `[env: NAME=...]`, or `[env: NAME]` for hidden values (PG_SLOT is not PG_SLOT_FAILOVER).
    let markers = [format!("[env: {variable}="), format!("[env: {variable}]")];
    let mut found = help_blocks(help)
        .into_iter()
        .filter(|block| markers.iter().any(|m| block.contains(m)));
    let block = found
        .next()
        .unwrap_or_else(|| panic!("--help does not name {variable}:\n{help}"));
    assert!(found.next().is_none(), "{variable} is named twice");
    block
}

/// The options only tests use: accepted, but not shown by `--help`.
const TEST_ONLY: [&str; 3] = ["CRASH_AT", "CRASH_AFTER_BATCHES", "SLOTLINE_SEED"];

#[test]
fn help_lists_every_variable_with_its_default() {
    let help = command("slotline").render_long_help().to_string();
    for (variable, default) in VARIABLES {
        if TEST_ONLY.contains(variable) {
            continue;
        }
        let block = help_block(&help, variable);
        match default {
            Some(default) => assert!(
                block.contains(&format!("[default: {default}]")),
                "{variable} should show [default: {default}]:\n{block}"
            ),
            None => assert!(!block.contains("[default:"), "{variable}:\n{block}"),
        }
    }
}

/// Each heading of `help` (a line `Heading:` at the margin), in order.
fn headings_of(help: &str) -> Vec<String> {
    help.lines()
        .filter(|line| !line.starts_with(' ') && line.ends_with(':') && !line.contains(". "))
        .map(|line| line.trim_end_matches(':').to_owned())
        .collect()
}

#[test]
fn help_groups_the_options_under_headings_for_every_command() {
    let mut command = command("slotline");
    command.build();
    for arg in command.get_arguments().filter(|a| a.get_env().is_some()) {
        let heading = arg.get_help_heading();
        assert!(
            arg.is_hide_set() || heading.is_some_and(|h| HEADINGS.contains(&h)),
            "--{} has no heading of HEADINGS: {heading:?}",
            arg.get_id()
        );
    }
    let mut expected = vec!["Options".to_owned()];
    expected.extend(HEADINGS.iter().map(|h| (*h).to_owned()));
    let root = command.render_long_help().to_string();
    assert_eq!(
        headings_of(&root),
        [&["Commands".to_owned()], &expected[..]].concat()
    );
    assert_eq!(
        headings_of(&command.render_help().to_string()),
        headings_of(&root),
        "-h groups as --help does"
    );
    let names: Vec<String> = command
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .filter(|name| name != "help")
        .collect();
    assert_eq!(names, ["check", "status", "ddl", "drop-slot"]);
    for name in names {
        let sub = command.find_subcommand_mut(&name).expect("a subcommand");
        let help = sub.render_long_help().to_string();
        assert_eq!(
            headings_of(&help),
            expected,
            "slotline {name} --help:\n{help}"
        );
        assert!(help.contains("--pg-url"), "slotline {name} --help:\n{help}");
    }
}

#[test]
fn test_only_options_are_hidden_from_help_and_still_work() {
    let mut command = command("slotline");
    command.build();
    let mut helps = vec![
        command.render_long_help().to_string(),
        command.render_help().to_string(),
    ];
    for sub in command.get_subcommands_mut() {
        helps.push(sub.render_long_help().to_string());
    }
    for help in &helps {
        for hidden in ["--crash-at", "--crash-after-batches", "--seed"]
            .iter()
            .chain(TEST_ONLY.iter())
        {
            assert!(!help.contains(hidden), "--help shows {hidden}:\n{help}");
        }
    }
    let args = parse(
        "slotline",
        [
            "slotline",
            "check",
            "--crash-at",
            "after_send",
            "--crash-after-batches",
            "3",
            "--seed",
            "7",
        ],
    )
    .expect("the hidden flags parse");
    assert!(args
        .pairs
        .contains(&("CRASH_AT".into(), "after_send".into())));
    assert!(args
        .pairs
        .contains(&("CRASH_AFTER_BATCHES".into(), "3".into())));
    assert_eq!(args.seed, Some(7));
}

/// `--crash-at`, hidden from `--help`, still documents exactly the crash points the
/// configuration accepts (each is reached by a decision trace in the core).
#[test]
fn crash_at_documents_exactly_the_accepted_crash_points() {
    let command = Cli::command();
    let arg = command
        .get_arguments()
        .find(|a| a.get_long() == Some("crash-at"))
        .expect("--crash-at");
    let doc = arg
        .get_long_help()
        .or(arg.get_help())
        .map(ToString::to_string)
        .unwrap_or_default();
    // The list is the last parenthesis.
    let listed: Vec<&str> = doc
        .rsplit_once('(')
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(list, _)| list.split(", ").collect())
        .unwrap_or_else(|| panic!("--crash-at lists its points in parentheses: {doc}"));
    let accepted: Vec<&str> = slotline_core::config::CrashPoint::ALL
        .iter()
        .map(|(_, name)| *name)
        .collect();
    assert_eq!(listed, accepted, "{doc}");
}

#[test]
fn help_says_the_pg_variables_fill_in_what_pg_url_leaves_unset() {
    // As `PgConnConfig::from_pairs` combines them: PG_URL's settings win, each PG* variable
    // (or its flag) fills in a setting PG_URL does not name, with or without a PG_URL.
    let help = command("slotline").render_long_help().to_string();
    assert!(!help.contains("PG_URL is absent"), "{help}");
    assert!(
        help.contains("the PG* options fill in whatever PG_URL leaves unset"),
        "{help}"
    );
    for variable in [
        "PGHOST",
        "PGPORT",
        "PGUSER",
        "PGPASSWORD",
        "PGDATABASE",
        "PGSSLMODE",
        "PGSSLROOTCERT",
        "PGSSLCERT",
        "PGSSLKEY",
        "PGCONNECT_TIMEOUT",
        "PGPASSFILE",
        "PGTARGETSESSIONATTRS",
    ] {
        let block = help_block(&help, variable);
        assert!(block.contains("unless PG_URL"), "{variable}:\n{block}");
    }
}

#[test]
fn every_variable_has_exactly_one_flag_and_no_flag_is_unknown() {
    let command = Cli::command();
    for (variable, _) in VARIABLES {
        let flags = command
            .get_arguments()
            .filter(|a| a.get_env().and_then(|e| e.to_str()) == Some(*variable))
            .count();
        assert_eq!(flags, 1, "{variable}");
    }
    for arg in command.get_arguments() {
        let Some(env) = arg.get_env().and_then(|e| e.to_str()) else {
            continue;
        };
        assert!(
            env == "SLOTLINE_SEED" || VARIABLES.iter().any(|(v, _)| *v == env),
            "{env} is not a configuration variable"
        );
        let long = arg.get_long().expect("every option is a long flag");
        assert!(
            long.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
            "--{long} is kebab-case"
        );
        assert!(
            arg.is_global_set(),
            "--{long} is global, so it may come after a subcommand too"
        );
    }
}

#[test]
fn secrets_never_show_their_environment_values() {
    for arg in Cli::command().get_arguments() {
        let Some(env) = arg.get_env().and_then(|e| e.to_str()) else {
            continue;
        };
        assert_eq!(arg.is_hide_env_values_set(), is_secret(env), "{env}");
    }
    // And a binary's command, whatever the environment holds.
    for arg in command("slotline").get_arguments() {
        let Some(env) = arg.get_env().and_then(|e| e.to_str()) else {
            continue;
        };
        assert!(!is_secret(env) || arg.is_hide_env_values_set(), "{env}");
    }
    for secret in ["PG_URL", "PGPASSWORD", "FELDERA_API_KEY"] {
        assert!(is_secret(secret));
    }
}

#[test]
fn help_shows_an_environment_value_only_when_one_is_set_and_not_secret() {
    use std::ffi::OsStr;
    assert!(shows_env_value("PGHOST", Some(OsStr::new("db.example"))));
    assert!(!shows_env_value("PGHOST", None), "unset");
    assert!(
        !shows_env_value("PGHOST", Some(OsStr::new(""))),
        "empty is unset"
    );
    for secret in ["PG_URL", "PGPASSWORD", "FELDERA_API_KEY"] {
        assert!(
            !shows_env_value(secret, Some(OsStr::new("hunter2"))),
            "{secret}"
        );
    }
    // Whatever this process's environment holds, nothing renders as `[env: NAME=]`.
    let mut command = command("slotline");
    command.build();
    let mut helps = vec![command.render_long_help().to_string()];
    for sub in command
        .get_subcommands_mut()
        .filter(|s| s.get_name() != "help")
    {
        helps.push(sub.render_long_help().to_string());
    }
    for help in helps {
        assert!(!help.contains("=]"), "{help}");
        assert!(help.contains("[env: PGPASSWORD]"), "{help}");
    }
}

#[test]
fn flags_become_pairs_keyed_by_variable_name() {
    let args = parse(
        "slotline",
        [
            "slotline",
            "--batch-max-rows",
            "ten",
            "--pg-host",
            "db.example",
            "--feldera-api-key",
            "k",
            "--crash-at",
            "after_ack",
        ],
    )
    .expect("parses");
    let get = |key: &str| {
        args.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(
        get("BATCH_MAX_ROWS"),
        Some("ten"),
        "values are not judged here"
    );
    assert_eq!(get("PGHOST"), Some("db.example"));
    assert_eq!(get("FELDERA_API_KEY"), Some("k"));
    assert_eq!(get("CRASH_AT"), Some("after_ack"));
}

#[test]
fn defaults_are_not_passed_as_pairs() {
    // The core applies its own defaults; passing them would hide which options were set.
    let args = parse("slotline", ["slotline"]).expect("parses");
    for (key, _) in &args.pairs {
        assert!(
            std::env::var_os(key).is_some(),
            "{key} came from neither a flag nor the environment"
        );
    }
}

#[test]
fn seed_flag_is_a_shell_option_not_configuration() {
    let args = parse("slotline", ["slotline", "--seed", "42"]).expect("parses");
    assert_eq!(args.seed, Some(42));
    assert!(args.pairs.iter().all(|(k, _)| k != "SLOTLINE_SEED"));
    let empty = parse("slotline", ["slotline", "--seed", ""]).expect("parses");
    assert_eq!(empty.seed, None, "empty means unset");
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    let bad_seed = parse("slotline", ["slotline", "--seed", "x"]).expect_err("bad seed");
    assert_eq!(bad_seed.exit_code(), 2);
    let unknown = parse("slotline", ["slotline", "--no-such-flag"]).expect_err("unknown");
    assert_eq!(unknown.exit_code(), 2);
    let help = parse("slotline", ["slotline", "--help"]).expect_err("help");
    assert_eq!(help.exit_code(), 0);
}

#[test]
fn debug_of_args_prints_keys_but_never_values() {
    let args = Args {
        pairs: vec![("PGPASSWORD".into(), "hunter2".into())],
        seed: None,
        flags: vec![("PGPASSWORD".into(), "--pg-password".into())],
        operation: None,
        notice: None,
    };
    let shown = format!("{args:?}");
    assert!(shown.contains("PGPASSWORD"));
    assert!(!shown.contains("hunter2"));
}

#[test]
fn options_given_as_flags_are_remembered_with_their_spelling() {
    let args = parse(
        "slotline",
        ["slotline", "--tables", "users,users", "--pg-url=x"],
    )
    .expect("parses");
    assert!(args
        .flags
        .contains(&("TABLES".to_owned(), "--tables".to_owned())));
    assert!(args
        .flags
        .contains(&("PG_URL".to_owned(), "--pg-url".to_owned())));
    assert!(
        args.flags.iter().all(|(v, _)| v != "FELDERA_URL"),
        "a default is not a flag the user gave: {:?}",
        args.flags
    );
}

#[test]
fn messages_name_the_flag_the_user_typed_instead_of_its_variable() {
    let flags = vec![
        ("TABLES".to_owned(), "--tables".to_owned()),
        ("PG_URL".to_owned(), "--pg-url".to_owned()),
    ];
    assert_eq!(
        spell_flags(
            r#"TABLES="users,users" is invalid: use either TABLES or PG_TABLE/FELDERA_TABLE"#,
            &flags
        ),
        r#"--tables="users,users" is invalid: use either --tables or PG_TABLE/FELDERA_TABLE"#
    );
    assert_eq!(
        spell_flags(
            "sslmode in PG_URL=\"x\" is invalid; PG_URLS, XPG_URL, PGSSLMODE stay",
            &flags
        ),
        "sslmode in --pg-url=\"x\" is invalid; PG_URLS, XPG_URL, PGSSLMODE stay"
    );
    assert_eq!(spell_flags("é TABLES ü", &flags), "é --tables ü");
    assert_eq!(spell_flags("TABLES", &[]), "TABLES");
}

#[test]
fn subcommands_take_every_option_before_or_after_them() {
    let args = parse(
        "slotline",
        [
            "slotline",
            "--pg-publication",
            "p1",
            "check",
            "--json",
            "--tables",
            "users",
        ],
    )
    .expect("parses");
    assert_eq!(args.operation, Some(Operation::Check { json: true }));
    assert!(args.pairs.contains(&("PG_PUBLICATION".into(), "p1".into())));
    assert!(args.pairs.contains(&("TABLES".into(), "users".into())));
    let args = parse("slotline", ["slotline", "drop-slot", "--yes"]).expect("parses");
    assert_eq!(
        args.operation,
        Some(Operation::DropSlot {
            yes: true,
            json: false
        })
    );
    let args = parse("slotline", ["slotline", "status"]).expect("parses");
    assert_eq!(args.operation, Some(Operation::Status { json: false }));
    let args = parse("slotline", ["slotline", "--metrics-addr", "127.0.0.1:9187"]).expect("run");
    assert_eq!(args.operation, None);
    assert!(args
        .pairs
        .contains(&("METRICS_ADDR".into(), "127.0.0.1:9187".into())));
    let unknown = parse("slotline", ["slotline", "inspect"]).expect_err("unknown subcommand");
    assert_eq!(unknown.exit_code(), 2);
}

/// The variables `packaging/example.env` (installed as /etc/slotline/example.env) names,
/// commented out (`#NAME=`) or set (`NAME=`).
fn example_env_variables() -> std::collections::BTreeSet<String> {
    include_str!("../../packaging/example.env")
        .lines()
        .filter_map(|line| {
            let line = line.strip_prefix('#').unwrap_or(line);
            let (name, _) = line.split_once('=')?;
            let is_name = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
            is_name.then(|| name.to_owned())
        })
        .collect()
}

#[test]
fn example_env_names_every_variable_the_configuration_reads() {
    let listed = example_env_variables();
    // The core's table of what `Config::from_pairs` reads, and every option's environment
    // variable on the command line (the shell's own, such as SLOTLINE_SEED, included).
    let from_core = VARIABLES.iter().map(|(name, _)| (*name).to_owned());
    let from_cli = command("slotline")
        .get_arguments()
        .filter_map(|arg| arg.get_env().and_then(|v| v.to_str()).map(str::to_owned))
        .collect::<Vec<_>>();
    assert!(from_cli.len() >= VARIABLES.len(), "{from_cli:?}");
    let missing: std::collections::BTreeSet<String> = from_core
        .chain(from_cli)
        .filter(|name| !listed.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "packaging/example.env does not mention {missing:?}: add each with a comment"
    );
}

#[test]
fn example_env_names_only_variables_slotline_reads() {
    let read: std::collections::BTreeSet<String> = command("slotline")
        .get_arguments()
        .filter_map(|arg| arg.get_env().and_then(|v| v.to_str()).map(str::to_owned))
        // The log filter, read by the logging setup rather than by an option.
        .chain(["RUST_LOG".to_owned()])
        .collect();
    let listed = example_env_variables();
    let unknown: Vec<&String> = listed.iter().filter(|name| !read.contains(*name)).collect();
    assert!(
        unknown.is_empty(),
        "packaging/example.env names {unknown:?}, which nothing reads"
    );
}

#[test]
fn example_env_sets_nothing_as_shipped() {
    // Copied as is, the file configures nothing (every line is a comment or blank), so a
    // STATE_DIR in it never overrides the unit's state directory by accident.
    let text = include_str!("../../packaging/example.env");
    let set: Vec<&str> = text
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .collect();
    assert!(set.is_empty(), "{set:?}");
}

fn pairs_of_list(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn ddl_publication_ignores_tables_inherited_from_the_environment() {
    // TABLES and PG_PUBLICATION from the environment (no flags), then `ddl --publication pub`.
    let mut pairs = pairs_of_list(&[
        ("TABLES", "users"),
        ("PG_PUBLICATION", "other"),
        ("PGHOST", "h"),
    ]);
    let mut flags = Vec::new();
    let notice = ddl_publication(&mut pairs, &mut flags, "pub");
    assert_eq!(
        pairs,
        pairs_of_list(&[("PGHOST", "h"), ("PG_PUBLICATION", "pub")]),
        "the publication's tables, not TABLES's"
    );
    assert_eq!(
        notice.as_deref(),
        Some("describing the tables of publication pub (--publication); TABLES from the environment is ignored")
    );
    assert_eq!(flags, pairs_of_list(&[("PG_PUBLICATION", "--publication")]));

    // All three route variables inherited: each is named.
    let mut pairs = pairs_of_list(&[("TABLES", "a"), ("PG_TABLE", "b"), ("FELDERA_TABLE", "c")]);
    let notice = ddl_publication(&mut pairs, &mut Vec::new(), "pub");
    assert_eq!(pairs, pairs_of_list(&[("PG_PUBLICATION", "pub")]));
    assert_eq!(
        notice.as_deref(),
        Some("describing the tables of publication pub (--publication); TABLES, PG_TABLE and FELDERA_TABLE from the environment are ignored")
    );

    // An empty TABLES is unset: dropped without a word.
    let mut pairs = pairs_of_list(&[("TABLES", "")]);
    assert_eq!(ddl_publication(&mut pairs, &mut Vec::new(), "pub"), None);
    assert_eq!(pairs, pairs_of_list(&[("PG_PUBLICATION", "pub")]));
}

#[test]
fn ddl_publication_keeps_tables_given_as_flags() {
    // `ddl --publication pub --tables users`: both explicit, so both count: users, as pub
    // publishes it.
    let mut pairs = pairs_of_list(&[("TABLES", "users")]);
    let mut flags = pairs_of_list(&[("TABLES", "--tables")]);
    assert_eq!(ddl_publication(&mut pairs, &mut flags, "pub"), None);
    assert_eq!(
        pairs,
        pairs_of_list(&[("TABLES", "users"), ("PG_PUBLICATION", "pub")])
    );

    // A flag and inherited variables: the flag's tables, the inherited ones named.
    let mut pairs = pairs_of_list(&[
        ("TABLES", "users"),
        ("PG_TABLE", "items"),
        ("FELDERA_TABLE", "x"),
    ]);
    let mut flags = pairs_of_list(&[("TABLES", "--tables")]);
    let notice = ddl_publication(&mut pairs, &mut flags, "pub");
    assert_eq!(
        pairs,
        pairs_of_list(&[("TABLES", "users"), ("PG_PUBLICATION", "pub")])
    );
    assert_eq!(
        notice.as_deref(),
        Some("describing the tables of --tables as publication pub publishes them; PG_TABLE and FELDERA_TABLE from the environment are ignored")
    );

    // The same through the command line.
    let args = parse(
        "slotline",
        [
            "slotline",
            "ddl",
            "--publication",
            "pub",
            "--tables",
            "users",
        ],
    )
    .expect("parses");
    assert!(args.pairs.contains(&("TABLES".into(), "users".into())));
    assert!(args
        .pairs
        .contains(&("PG_PUBLICATION".into(), "pub".into())));
    assert_eq!(args.notice, None);
    // Without --publication nothing changes: TABLES, else PG_PUBLICATION's tables.
    let args = parse("slotline", ["slotline", "ddl", "--tables", "users"]).expect("parses");
    assert!(args.pairs.contains(&("TABLES".into(), "users".into())));
    assert_eq!(args.notice, None);
}
