//! `slotline-blocking`: slotline on std threads, with no async runtime (for minimal
//! hosts). See `slotline_shell` for what it shares with the tokio shell.

use slotline_shell::{launch, logging};

fn main() {
    let code = match launch::start(env!("CARGO_BIN_NAME"), std::env::args_os()) {
        Ok(started) => {
            let options = started.options();
            slotline_blocking::run(started.machine, started.clock, options)
        }
        Err(code) => code,
    };
    logging::flush();
    std::process::exit(code);
}
