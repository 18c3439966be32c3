//! The streaming connector's shell. Streaming is not wired yet: the core's pipeline lands
//! first (issue 4), the shell after it (issues 5 and 6). Until then the binary refuses to
//! run rather than pretending to stream.

use std::process::ExitCode;

fn main() -> ExitCode {
    let name = env!("CARGO_BIN_NAME");
    if std::env::args().nth(1).as_deref() == Some("--version") {
        println!("{name} {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    eprintln!(
        "{name} {}: streaming is not implemented in this build yet (the core decoders are); \
         nothing was started. Accepted: --version",
        env!("CARGO_PKG_VERSION")
    );
    ExitCode::from(2)
}
