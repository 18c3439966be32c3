use super::{TcpKeepalive, DEFAULT_KEEPALIVE};
use crate::config::{Config, ConfigError};

fn keepalive_of(url: &str) -> Result<Option<TcpKeepalive>, ConfigError> {
    let url: &'static str = url.to_owned().leak();
    let pairs = [
        ("PG_URL", url),
        ("PG_PUBLICATION", "pub"),
        ("TABLES", "t"),
        ("FELDERA_PIPELINE", "p"),
    ];
    Config::from_pairs(pairs).map(|c| c.pg.keepalive)
}

fn error_of(url: &str) -> String {
    keepalive_of(url).unwrap_err().to_string()
}

fn keepalive(
    idle_secs: u32,
    interval_secs: u32,
    count: u32,
    user_timeout_ms: Option<u32>,
) -> TcpKeepalive {
    TcpKeepalive {
        idle_secs,
        interval_secs,
        count,
        user_timeout_ms,
    }
}

#[test]
fn unset_parameters_give_a_keepalive_that_outlives_a_350_s_nat_timeout() {
    assert_eq!(DEFAULT_KEEPALIVE, keepalive(60, 10, 6, Some(120_000)));
    assert_eq!(
        keepalive_of("postgres://u@db/app"),
        Ok(Some(DEFAULT_KEEPALIVE))
    );
    assert_eq!(keepalive_of("host=db user=u"), Ok(Some(DEFAULT_KEEPALIVE)));
    // Without PG_URL too: libpq has no variables for these parameters.
    let pairs = [
        ("PGHOST", "db"),
        ("PGUSER", "u"),
        ("PG_PUBLICATION", "pub"),
        ("TABLES", "t"),
        ("FELDERA_PIPELINE", "p"),
    ];
    let pg = Config::from_pairs(pairs).unwrap().pg;
    assert_eq!(pg.keepalive, Some(DEFAULT_KEEPALIVE));
    assert_eq!(pg.tcp_keepalive(), Some(DEFAULT_KEEPALIVE));
}

#[test]
fn a_unix_socket_gets_no_keepalive() {
    let url: &'static str = "host=/var/run/postgresql user=u";
    let pairs = [
        ("PG_URL", url),
        ("PG_PUBLICATION", "pub"),
        ("TABLES", "t"),
        ("FELDERA_PIPELINE", "p"),
    ];
    let pg = Config::from_pairs(pairs).unwrap().pg;
    assert_eq!(pg.keepalive, Some(DEFAULT_KEEPALIVE));
    assert_eq!(pg.tcp_keepalive(), None);
}

#[test]
fn the_parameters_are_read_from_both_forms_of_pg_url() {
    assert_eq!(
        keepalive_of(
            "postgres://u@db/app?keepalives=1&keepalives_idle=30&keepalives_interval=5&keepalives_count=3"
        ),
        Ok(Some(keepalive(30, 5, 3, Some(45_000)))),
        "the user timeout follows the schedule it was not given"
    );
    assert_eq!(
        keepalive_of("host=db user=u keepalives_idle=' 300 ' tcp_user_timeout=9000"),
        Ok(Some(keepalive(300, 10, 6, Some(9_000))))
    );
}

#[test]
fn keepalives_zero_turns_keepalive_off_and_any_other_integer_keeps_it_on() {
    assert_eq!(keepalive_of("postgres://u@db/app?keepalives=0"), Ok(None));
    assert_eq!(
        keepalive_of("host=db user=u keepalives=0 keepalives_idle=30"),
        Ok(None)
    );
    assert_eq!(
        keepalive_of("host=db user=u keepalives=2"),
        Ok(Some(DEFAULT_KEEPALIVE))
    );
    insta::assert_snapshot!(
        error_of("postgres://u:hunter2@db/app?keepalives=off"),
        @r#"keepalives in PG_URL="off" is invalid: an integer: 0 turns TCP keepalive off, any other value keeps it on (the default)"#
    );
}

#[test]
fn timings_outside_what_linux_accepts_are_refused_naming_the_parameter() {
    insta::assert_snapshot!(
        error_of("postgres://u@db/app?keepalives_idle=0"),
        @r#"keepalives_idle in PG_URL="0" is invalid: whole seconds from 1 to 32767 (default 60)"#
    );
    insta::assert_snapshot!(
        error_of("host=db user=u keepalives_interval=32768"),
        @r#"keepalives_interval in PG_URL="32768" is invalid: whole seconds from 1 to 32767 (default 10)"#
    );
    insta::assert_snapshot!(
        error_of("host=db user=u keepalives_count=128"),
        @r#"keepalives_count in PG_URL="128" is invalid: a number of probes from 1 to 127 (default 6)"#
    );
    for bad in ["-1", "1m", "", "1.5", "99999999999"] {
        let url = format!("host=db user=u keepalives_idle='{bad}'");
        let err = keepalive_of(&url).unwrap_err();
        assert_eq!(err.variable, "keepalives_idle in PG_URL", "{bad:?}");
    }
    // Checked even when keepalive is off, so a typo does not wait for the day it is on.
    assert!(keepalive_of("host=db user=u keepalives=0 keepalives_count=0").is_err());
    assert_eq!(
        keepalive_of(
            "host=db user=u keepalives_idle=32767 keepalives_interval=32767 keepalives_count=127"
        ),
        Ok(Some(keepalive(32_767, 32_767, 127, Some(4_194_176_000))))
    );
}

#[test]
fn tcp_user_timeout_is_milliseconds_and_zero_or_negative_keeps_the_system_default() {
    let user_timeout = |raw: &str| {
        keepalive_of(&format!("host=db user=u tcp_user_timeout={raw}"))
            .map(|k| k.and_then(|k| k.user_timeout_ms))
    };
    assert_eq!(user_timeout("0"), Ok(None));
    assert_eq!(user_timeout("-5"), Ok(None));
    assert_eq!(user_timeout("250"), Ok(Some(250)));
    assert_eq!(user_timeout("2147483647"), Ok(Some(2_147_483_647)));
    assert!(user_timeout("2147483648").is_err());
    insta::assert_snapshot!(
        error_of("postgres://u@db/app?tcp_user_timeout=2min"),
        @r#"tcp_user_timeout in PG_URL="2min" is invalid: milliseconds up to 2147483647; 0 keeps the system's default (default: keepalives_idle + keepalives_interval * keepalives_count)"#
    );
}

#[test]
fn a_misspelt_keepalive_parameter_gets_a_did_you_mean() {
    let message = error_of("postgres://u@db/app?keepalive_idle=30");
    assert!(
        message.starts_with(
            r#"PG_URL has an unknown parameter "keepalive_idle": did you mean keepalives_idle? "#
        ),
        "{message}"
    );
}

#[test]
fn the_server_gets_the_same_keepalive_and_keeps_its_own_user_timeout_when_none_is_set() {
    let settings = |k: TcpKeepalive| -> Vec<String> {
        k.server_settings()
            .into_iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect()
    };
    assert_eq!(
        settings(DEFAULT_KEEPALIVE),
        [
            "tcp_keepalives_idle=60",
            "tcp_keepalives_interval=10",
            "tcp_keepalives_count=6",
            "tcp_user_timeout=120000"
        ]
    );
    assert_eq!(
        settings(keepalive(37, 7, 3, None)),
        [
            "tcp_keepalives_idle=37",
            "tcp_keepalives_interval=7",
            "tcp_keepalives_count=3"
        ]
    );
}
