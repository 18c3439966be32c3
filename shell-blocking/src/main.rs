//! `slotline-blocking`: slotline on std threads, with no async runtime (for minimal
//! hosts). See `slotline_shell` for what it shares with the tokio shell.

use slotline_shell::{logging, startup, RunOptions};

fn main() {
    let code = match startup::start(env!("CARGO_BIN_NAME"), std::env::args_os()) {
        Ok(started) => {
            let options = RunOptions {
                tls: started.tls,
                ..RunOptions::default()
            };
            slotline_blocking::run(started.pipeline, started.clock, options)
        }
        Err(code) => code,
    };
    logging::flush();
    std::process::exit(code);
}
