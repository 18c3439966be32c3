//! `slotline`: slotline on a tokio runtime. See the `slotline` library for the runtime and
//! `slotline_shell` for what it shares with `slotline-blocking`.

use slotline_shell::{logging, startup, RunOptions};

fn main() {
    let code = match startup::start(env!("CARGO_BIN_NAME"), std::env::args_os()) {
        Ok(started) => {
            let options = RunOptions {
                tls: started.tls,
                ..RunOptions::default()
            };
            slotline::run(started.pipeline, started.clock, options)
        }
        Err(code) => code,
    };
    logging::flush();
    std::process::exit(code);
}
