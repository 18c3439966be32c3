//! `slotline`: slotline on a tokio runtime. See the `slotline` library for the runtime and
//! `slotline_shell` for what it shares with `slotline-blocking`.

use slotline_shell::{launch, logging};

fn main() {
    let code = match launch::start(env!("CARGO_BIN_NAME"), std::env::args_os()) {
        Ok(started) => {
            let options = started.options();
            slotline::run(started.machine, started.clock, options)
        }
        Err(code) => code,
    };
    logging::flush();
    std::process::exit(code);
}
