//! The options of every PostgreSQL TCP socket, set once here for both shells right after
//! the connect: `TCP_NODELAY`, and the keepalive the core decided
//! (docs/guide/operating.md, "Connections behind a NAT or a load balancer").
//!
//! A socket whose options cannot be set is a connection that could not be opened, as
//! libpq treats it; the core decides what follows. `TCP_KEEPINTVL`, `TCP_KEEPCNT` and
//! `TCP_USER_TIMEOUT` are set on Linux only; elsewhere the system's values stay.

use slotline_core::config::TcpKeepalive;
use slotline_core::io::{ConnFailure, FailureKind, PgTarget};
use socket2::SockRef;
use std::os::fd::AsFd;
use std::time::Duration;

/// Sets the options of a connected PostgreSQL TCP socket; `keepalive: None` leaves
/// keepalive as the system has it (off, unless the system turns it on).
pub fn set_options<S: AsFd>(stream: &S, keepalive: Option<&TcpKeepalive>) -> std::io::Result<()> {
    let socket = SockRef::from(stream);
    // Protocol messages are small and latency-bound (status updates).
    socket.set_tcp_nodelay(true)?;
    let Some(keepalive) = keepalive else {
        return Ok(());
    };
    let params =
        socket2::TcpKeepalive::new().with_time(Duration::from_secs(keepalive.idle_secs.into()));
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let params = params
        .with_interval(Duration::from_secs(keepalive.interval_secs.into()))
        .with_retries(keepalive.count);
    socket.set_tcp_keepalive(&params)?;
    #[cfg(any(target_os = "linux", target_os = "android"))]
    socket.set_tcp_user_timeout(
        keepalive
            .user_timeout_ms
            .map(|ms| Duration::from_millis(ms.into())),
    )?;
    Ok(())
}

/// A socket whose options could not be set (same in both shells).
pub fn options_error(target: &PgTarget, error: &std::io::Error) -> ConnFailure {
    ConnFailure::new(
        FailureKind::Connect,
        format!("connect to {target}: cannot set the socket's TCP options: {error}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use slotline_core::config::DEFAULT_KEEPALIVE;
    use std::net::{TcpListener, TcpStream};

    /// A socket connected to a local listener, with `keepalive` applied, and its peer.
    fn connected(keepalive: Option<&TcpKeepalive>) -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let stream = TcpStream::connect(listener.local_addr().expect("address")).expect("connect");
        let (peer, _) = listener.accept().expect("accept");
        set_options(&stream, keepalive).expect("set the options");
        (stream, peer)
    }

    #[test]
    fn the_default_keepalive_is_on_the_socket_with_its_timings() {
        let (stream, _peer) = connected(Some(&DEFAULT_KEEPALIVE));
        let socket = SockRef::from(&stream);
        assert!(socket.tcp_nodelay().unwrap());
        assert!(socket.keepalive().unwrap(), "SO_KEEPALIVE");
        assert_eq!(
            socket.tcp_keepalive_time().unwrap(),
            Duration::from_secs(60)
        );
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            assert_eq!(
                socket.tcp_keepalive_interval().unwrap(),
                Duration::from_secs(10)
            );
            assert_eq!(socket.tcp_keepalive_retries().unwrap(), 6);
            assert_eq!(
                socket.tcp_user_timeout().unwrap(),
                Some(Duration::from_secs(120))
            );
        }
    }

    #[test]
    fn configured_timings_reach_the_socket_and_no_user_timeout_keeps_the_systems() {
        let keepalive = TcpKeepalive {
            idle_secs: 37,
            interval_secs: 7,
            count: 3,
            user_timeout_ms: None,
        };
        let (stream, _peer) = connected(Some(&keepalive));
        let socket = SockRef::from(&stream);
        assert!(socket.keepalive().unwrap());
        assert_eq!(
            socket.tcp_keepalive_time().unwrap(),
            Duration::from_secs(37)
        );
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            assert_eq!(
                socket.tcp_keepalive_interval().unwrap(),
                Duration::from_secs(7)
            );
            assert_eq!(socket.tcp_keepalive_retries().unwrap(), 3);
            assert_eq!(socket.tcp_user_timeout().unwrap(), None);
        }
    }

    #[test]
    fn keepalives_zero_leaves_keepalive_off() {
        let (stream, _peer) = connected(None);
        let socket = SockRef::from(&stream);
        assert!(socket.tcp_nodelay().unwrap());
        assert!(!socket.keepalive().unwrap(), "SO_KEEPALIVE");
        #[cfg(any(target_os = "linux", target_os = "android"))]
        assert_eq!(socket.tcp_user_timeout().unwrap(), None);
    }

    #[test]
    fn a_socket_that_refuses_the_options_is_a_connect_failure_naming_the_target() {
        let target = PgTarget::Tcp {
            host: "db".into(),
            port: 5432,
            keepalive: Some(DEFAULT_KEEPALIVE),
        };
        let error = std::io::Error::from_raw_os_error(22);
        let failure = options_error(&target, &error);
        assert_eq!(failure.kind, FailureKind::Connect);
        assert!(
            failure
                .message
                .starts_with("connect to db:5432: cannot set the socket's TCP options: "),
            "{}",
            failure.message
        );
    }
}
